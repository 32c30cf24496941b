// ba-mcp's read-only rule for Spark, loaded with spark.sql.extensions because Spark has no read-only setting.
// Two boundaries in the engine:
//   * a parser wrapper: a statement whose parsed plan holds EXECUTE IMMEDIATE or SQL scripting is refused before
//     Spark analyzes (and so runs) the text inside it;
//   * a check rule over every plan Spark analyzes (SQL text, DataFrame operations, each statement of a script):
//     an ALLOW-LIST of read plan nodes — projections, filters, joins, aggregates, windows, set operations, CTEs,
//     limits, samples, catalog tables and views, literal rows — plus SHOW / DESCRIBE / EXPLAIN commands. Any other
//     node is refused: commands, writes, script transforms (TRANSFORM … USING runs a program), typed Dataset
//     operations and pandas / Arrow maps (they run user code), streaming, cursors, variables.
//     Expressions that run user or Java code are refused wherever they are: Python / Scala / Hive UDFs, UDAFs and
//     UDTFs, reflect() / java_method() / try_reflect().
//   * a table read straight from a file path (text.`/etc/hostname`, parquet.`/data/x`) is refused unless the server
//     was started with -Dba_mcp.allow_path_reads=true.
// Refusals are errors whose message starts with BA_MCP_READ_ONLY.
package ba_mcp.spark;

import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.parser.SqlStatementSplitResult;
import org.apache.spark.sql.catalyst.parser.TemporalIdentifier;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

public class ReadOnlyRule extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    private static final boolean PATH_READS = Boolean.getBoolean("ba_mcp.allow_path_reads");

    // The plan nodes a read query is made of (simple class names of the analyzed plan).
    static final Set<String> READ_NODES = Set.of(
            "Project", "Filter", "Aggregate", "Join", "LateralJoin", "AsOfJoin", "Sort", "GlobalLimit",
            "LocalLimit", "Offset", "Tail", "Union", "Intersect", "Except", "Distinct", "Deduplicate",
            "SubqueryAlias", "View", "LocalRelation", "OneRowRelation", "EmptyRelation", "Range", "LogicalRelation",
            "DataSourceV2Relation", "HiveTableRelation", "InMemoryRelation", "Window", "WindowGroupLimit", "Expand",
            "Generate", "Sample", "Repartition", "RepartitionByExpression", "RebalancePartitions", "WithCTE",
            "CTERelationDef", "CTERelationRef", "UnionLoop", "UnionLoopRef", "ResolvedHint", "Subquery",
            "ReturnAnswer", "Pivot", "Unpivot", "Transpose", "WithWindowDefinition", "DataFrameDropColumns",
            "AttachDistributedSequence", "Zip");

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectParser(new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
            @Override
            public ParserInterface apply(SparkSession session, ParserInterface delegate) {
                return new Parser(delegate);
            }
        });
        extensions.injectCheckRule(new AbstractFunction1<SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
            @Override
            public Function1<LogicalPlan, BoxedUnit> apply(SparkSession session) {
                return new Check();
            }
        });
        return BoxedUnit.UNIT;
    }

    static final class Check extends AbstractFunction1<LogicalPlan, BoxedUnit> implements java.io.Serializable {
        @Override
        public BoxedUnit apply(LogicalPlan plan) {
            String top = plan.getClass().getSimpleName();
            boolean metadata = top.startsWith("Show") || top.startsWith("Describe") || top.startsWith("Explain");
            plan.foreachWithSubqueries(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan node) {
                    checkNode(node, metadata && node != plan);
                    return BoxedUnit.UNIT;
                }
            });
            if (metadata) {
                checkExpressions(plan);
            }
            return BoxedUnit.UNIT;
        }
    }

    // A node of the plan: on the allow-list (or the SHOW / DESCRIBE / EXPLAIN command at the top and the resolved
    // names beneath it), a catalog table rather than a path, no expression that runs user code.
    static void checkNode(LogicalPlan node, boolean underMetadata) {
        String name = node.getClass().getSimpleName();
        boolean metadata = name.startsWith("Show") || name.startsWith("Describe") || name.startsWith("Explain");
        if (metadata || (underMetadata && name.startsWith("Resolved"))) {
            return;
        }
        if (name.contains("ExecuteImmediate") || name.contains("Compound") || name.contains("Scripting")) {
            refuse("SQL scripting and EXECUTE IMMEDIATE are not allowed", name);
        }
        if (name.equals("ScriptTransformation")) {
            refuse("script transforms (TRANSFORM ... USING) run programs and are not allowed", name);
        }
        if (!READ_NODES.contains(name)) {
            refuse("the database is read-only: only queries (and SHOW, DESCRIBE, EXPLAIN) run", name);
        }
        if (!PATH_READS && node instanceof LogicalRelation && ((LogicalRelation) node).catalogTable().isEmpty()) {
            refuse("reading files by path is not allowed; query the catalog's tables", name);
        }
        checkExpressions(node);
    }

    static void checkExpressions(LogicalPlan node) {
        scala.collection.Iterator<Expression> expressions = node.expressions().iterator();
        while (expressions.hasNext()) {
            expressions.next().foreach(new AbstractFunction1<Expression, BoxedUnit>() {
                @Override
                public BoxedUnit apply(Expression e) {
                    checkExpression(e);
                    return BoxedUnit.UNIT;
                }
            });
        }
    }

    static void checkExpression(Expression e) {
        String kind = e.getClass().getSimpleName();
        if (kind.contains("Reflection") || kind.contains("JavaMethod")) {
            refuse("calls of Java methods (reflect, java_method) are not allowed", kind);
        }
        if (kind.contains("UDF") || kind.contains("UDAF") || kind.contains("UDTF") || kind.startsWith("Hive")
                || kind.contains("UserDefined") || kind.equals("ScalaAggregator")
                || userDefined(e.getClass())) {
            refuse("user-defined functions run user code and are not allowed", kind);
        }
    }

    static boolean userDefined(Class<?> type) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            for (Class<?> i : c.getInterfaces()) {
                if (i.getSimpleName().equals("UserDefinedExpression")) {
                    return true;
                }
            }
        }
        return false;
    }

    static void refuse(String why, String what) {
        throw new UnsupportedOperationException("BA_MCP_READ_ONLY: " + why + " (" + what + ")");
    }

    // Refuses EXECUTE IMMEDIATE and SQL scripting in the parsed statement (Spark resolves EXECUTE IMMEDIATE's
    // text while analyzing, so the check rule would see only the statement inside); everything else is the
    // session's own parser.
    static final class Parser implements ParserInterface {
        private final ParserInterface delegate;

        Parser(ParserInterface delegate) {
            this.delegate = delegate;
        }

        private static LogicalPlan checked(LogicalPlan plan) {
            plan.foreach(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan node) {
                    String name = node.getClass().getSimpleName();
                    if (name.contains("ExecuteImmediate") || name.contains("Compound")
                            || name.contains("Scripting")) {
                        refuse("SQL scripting and EXECUTE IMMEDIATE are not allowed", name);
                    }
                    return BoxedUnit.UNIT;
                }
            });
            return plan;
        }

        @Override
        public LogicalPlan parsePlan(String sql) throws ParseException {
            return checked(delegate.parsePlan(sql));
        }

        @Override
        public LogicalPlan parsePlanWithParameters(String sql, ParameterContext context) throws ParseException {
            return checked(delegate.parsePlanWithParameters(sql, context));
        }

        @Override
        public LogicalPlan parseQuery(String sql) throws ParseException {
            return checked(delegate.parseQuery(sql));
        }

        @Override
        public Expression parseExpression(String sql) throws ParseException {
            return delegate.parseExpression(sql);
        }

        @Override
        public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
            return delegate.parseTableIdentifier(sql);
        }

        @Override
        public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
            return delegate.parseFunctionIdentifier(sql);
        }

        @Override
        public scala.collection.immutable.Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
            return delegate.parseMultipartIdentifier(sql);
        }

        @Override
        public TemporalIdentifier parseTemporalTableIdentifier(String sql) throws ParseException {
            return delegate.parseTemporalTableIdentifier(sql);
        }

        @Override
        public StructType parseRoutineParam(String sql) throws ParseException {
            return delegate.parseRoutineParam(sql);
        }

        @Override
        public SqlStatementSplitResult splitStatements(String sql) {
            return delegate.splitStatements(sql);
        }

        @Override
        public StructType parseTableSchema(String sql) throws ParseException {
            return delegate.parseTableSchema(sql);
        }

        @Override
        public DataType parseDataType(String sql) throws ParseException {
            return delegate.parseDataType(sql);
        }
    }
}
