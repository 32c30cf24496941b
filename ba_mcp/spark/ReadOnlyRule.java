// ba-mcp's read-only rule for Spark: a check rule in the engine (loaded with spark.sql.extensions), because Spark
// has no read-only setting. Every plan Spark analyzes — SQL text, DataFrame operations, each statement of a
// script, the statement inside EXECUTE IMMEDIATE — is refused when it holds anything but a query:
//   * a command (DDL, DML, INSERT, CACHE, ADD JAR, SET, …), except SHOW / DESCRIBE / EXPLAIN;
//   * a write (InsertIntoStatement, InsertIntoDir, V2 writes, CTAS/RTAS);
//   * SQL scripting blocks and EXECUTE IMMEDIATE;
//   * reflect() / java_method() / try_reflect() (calls of Java methods);
//   * a table read straight from a file path (text.`/etc/hostname`, parquet.`/data/x`), unless the server was
//     started with -Dba_mcp.allow_path_reads=true.
// Refusals are errors whose message starts with BA_MCP_READ_ONLY.
package ba_mcp.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

public class ReadOnlyRule extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    private static final boolean PATH_READS = Boolean.getBoolean("ba_mcp.allow_path_reads");

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
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
            plan.foreachWithSubqueries(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan node) {
                    checkNode(node);
                    return BoxedUnit.UNIT;
                }
            });
            return BoxedUnit.UNIT;
        }
    }

    static void checkNode(LogicalPlan node) {
        String name = node.getClass().getSimpleName();
        boolean reading = name.startsWith("Show") || name.startsWith("Describe") || name.startsWith("Explain");
        if (name.contains("Compound") || name.contains("ExecuteImmediate") || name.contains("Scripting")) {
            refuse("SQL scripting and EXECUTE IMMEDIATE are not allowed", name);
        }
        if ((node instanceof Command && !reading) || name.startsWith("InsertInto") || name.contains("Write")
                || name.startsWith("CreateTable") || name.startsWith("ReplaceTable") || name.equals("AppendData")
                || name.startsWith("Overwrite")) {
            refuse("the database is read-only: only queries (and SHOW, DESCRIBE, EXPLAIN) run", name);
        }
        if (!PATH_READS && node instanceof LogicalRelation && ((LogicalRelation) node).catalogTable().isEmpty()) {
            refuse("reading files by path is not allowed; query the catalog's tables", name);
        }
        scala.collection.Iterator<Expression> expressions = node.expressions().iterator();
        while (expressions.hasNext()) {
            expressions.next().foreach(new AbstractFunction1<Expression, BoxedUnit>() {
                @Override
                public BoxedUnit apply(Expression e) {
                    String kind = e.getClass().getSimpleName();
                    if (kind.contains("Reflection") || kind.contains("JavaMethod")) {
                        refuse("calls of Java methods (reflect, java_method) are not allowed", kind);
                    }
                    return BoxedUnit.UNIT;
                }
            });
        }
    }

    static void refuse(String why, String what) {
        throw new UnsupportedOperationException("BA_MCP_READ_ONLY: " + why + " (" + what + ")");
    }
}
