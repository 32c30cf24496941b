"""The tool ``business_days``: the working days (Monday to Friday, less the holidays the operator lists) of each
month between two dates — a table, so the pipeline shows it at every output level and keeps it as an artifact."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from ba_mcp import ErrorType, Services, Table, Tool, ToolContext, ToolFailure, ToolParams, ToolSettings


class BusinessDaysParams(ToolParams):
    start: dt.date = Field(description="first day (YYYY-MM-DD)")
    end: dt.date = Field(description="last day, included")


class BusinessDaysSettings(ToolSettings):
    holidays: list[dt.date] = Field([], description="Days that are no working day (YYYY-MM-DD).")


class BusinessDays(Tool):
    name = "business_days"
    title = "Working days per month"
    description = "Working days (Mon-Fri, less holidays) per month between two dates."
    Params = BusinessDaysParams
    Settings = BusinessDaysSettings

    @classmethod
    def build(cls, services: Services) -> BusinessDays:
        return cls(services.settings.tool(cls.name))

    def __init__(self, settings: ToolSettings) -> None:
        self.settings = settings
        self.holidays = frozenset(getattr(settings, "holidays", ()))

    def execute(self, params: BusinessDaysParams, ctx: ToolContext) -> Table:
        import pyarrow as pa

        if params.end < params.start:
            raise ToolFailure(ErrorType.INVALID_PARAMETERS, "BAD_RANGE", "end is before start", "give start <= end")
        if (params.end - params.start).days > 366 * 20:
            raise ToolFailure(ErrorType.INVALID_PARAMETERS, "BAD_RANGE", "more than 20 years", "ask for fewer years")
        counts: dict[str, int] = {}
        day = params.start
        while day <= params.end:
            month = day.strftime("%Y-%m")
            counts.setdefault(month, 0)
            if day.weekday() < 5 and day not in self.holidays:
                counts[month] += 1
            day += dt.timedelta(days=1)
        frame = pa.table({"month": list(counts), "working_days": pa.array(list(counts.values()), pa.int32())})
        return Table(f"working days {params.start} to {params.end}", frame, total_rows=frame.num_rows)
