"""The PDF statement of one business unit for one month, for its budget owner (reportlab)."""

from datetime import datetime
from decimal import Decimal
from io import BytesIO
from xml.sax.saxutils import escape

from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.shapes import Drawing, String
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from billing.chargeback import Node, Report
from billing.ledger import rate_windows

ACCENT = colors.HexColor("#2f6fde")
LINE = colors.HexColor("#dfe3ec")
BASE_STYLE = [
    ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"), ("FONTSIZE", (0, 0), (-1, -1), 8.5),
    ("TEXTCOLOR", (0, 0), (-1, 0), colors.HexColor("#5b6478")), ("LINEBELOW", (0, 0), (-1, -1), 0.4, LINE),
    ("ALIGN", (-2, 0), (-1, -1), "RIGHT"), ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
]


def _dollars(value: Decimal | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _hours(value: Decimal) -> str:
    return f"{value:,.1f}"


def _table(rows: list[list], widths: list[float], extra: list | None = None) -> Table:
    table = Table(rows, colWidths=[w * mm for w in widths], repeatRows=1)
    table.setStyle(TableStyle(BASE_STYLE + (extra or [])))
    return table


def _summary(unit: Node, report: Report) -> Table:
    change = "—" if unit.change is None else f"{unit.change:+.1f}%"
    previous = f"Previous month to {report.compared_until:%d %b %H:%M}" if report.compared_until else "Previous month"
    rows = [["Cost", "GPU-hours", "Share of cluster cost", previous, "Change"],
            [_dollars(unit.cost), _hours(unit.gpu_hours), f"{unit.share}%",
             _dollars(unit.previous_cost) if report.previous_available else "—", change]]
    return _table(rows, [34, 30, 40, 36, 30], [("FONTSIZE", (0, 1), (-1, 1), 12), ("ALIGN", (0, 0), (-1, -1), "LEFT")])


def _chart(unit: Node, report: Report) -> Drawing:
    months = report.chart["months"]
    values = [float(v or 0) for v in report.chart["series"].get(unit.name, [0] * len(months))]
    drawing = Drawing(170 * mm, 55 * mm)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 15 * mm, 8 * mm, 150 * mm, 40 * mm
    chart.data = [values]  # reportlab draws floats; the figures in the tables stay Decimal
    chart.categoryAxis.categoryNames = months
    chart.categoryAxis.labels.fontSize = 7
    chart.valueAxis.labels.fontSize = 7
    chart.valueAxis.valueMin = 0
    chart.valueAxis.labelTextFormat = lambda v: f"${v:,.0f}"
    chart.bars[0].fillColor = ACCENT
    chart.barWidth = 8
    drawing.add(chart)
    drawing.add(String(15 * mm, 51 * mm, f"Cost of {unit.name} by month (USD)", fontSize=8,
                       fillColor=colors.HexColor("#5b6478")))
    return drawing


def _detail(unit: Node) -> Table:
    rows = [["Team", "Project", "Cost code", "Tier", "GPU model", "GPU-hours", "Cost"]]
    bold = []
    for team in unit.children.values():
        for project in team.children.values():
            for row in project.rows:
                rows.append([team.name, project.name, project.code or "—", row.tier, row.gpu_model,
                             _hours(row.gpu_hours), _dollars(row.cost)])
        rows.append([f"{team.name} total", "", "", "", "", _hours(team.gpu_hours), _dollars(team.cost)])
        bold.append(len(rows) - 1)
    rows.append([f"{unit.name} total", "", "", "", "", _hours(unit.gpu_hours), _dollars(unit.cost)])
    extra = [("FONTNAME", (0, i), (-1, i), "Helvetica-Bold") for i in bold]
    extra += [("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"), ("LINEABOVE", (0, -1), (-1, -1), 1, colors.black)]
    return _table(rows, [30, 34, 22, 20, 24, 22, 24], extra)


def _notes(unit: Node, styles) -> list:
    """Adjustment lines (and any other line with a note) say what they are, who booked them and why."""
    noted = [(project.name, row) for team in unit.children.values() for project in team.children.values()
             for row in project.rows if row.note]
    if not noted:
        return []
    return [Paragraph("Notes on lines", styles["Heading3"]),
            *(Paragraph(f"{name}, {row.tier}, {_dollars(row.cost)}: {escape(row.note)}", styles["Normal"])
              for name, row in noted)]


def _by_tier(unit: Node) -> Table:
    totals: dict[tuple[str, str], list[Decimal]] = {}
    for project in (p for team in unit.children.values() for p in team.children.values()):
        for row in project.rows:
            entry = totals.setdefault((row.tier, row.gpu_model), [Decimal(0), Decimal(0)])
            entry[0] += row.gpu_hours
            entry[1] += row.cost
    rows = [["Tier", "GPU model", "GPU-hours", "Cost"]]
    rows += [[tier, model, _hours(h), _dollars(c)] for (tier, model), (h, c) in sorted(totals.items())]
    rows.append(["Total", "", _hours(unit.gpu_hours), _dollars(unit.cost)])
    return _table(rows, [40, 40, 40, 40], [("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold")])


def _rates(report: Report) -> Table:
    rows = [["GPU model", "Tier", "From", "Until (excl.)", "$ per GPU-hour"]]
    for window in rate_windows(report.month):
        rows.append([window.gpu_model, window.tier, f"{window.low:%Y-%m-%d}", f"{window.high:%Y-%m-%d}",
                     f"${window.price:.4f}"])
    return _table(rows, [35, 30, 30, 30, 35])


def _status(report: Report) -> str:
    if report.closed is None:
        return "Provisional: the month is open and computed at today's rates until it is closed."
    by = f" by {report.closed.closed_by.get_username()}" if report.closed.closed_by else ""
    return f"Final: closed {report.closed.closed_at:%Y-%m-%d %H:%M} UTC{by}; corrections appear in a later month."


def statement_pdf(report: Report, unit_name: str, *, generated: datetime) -> bytes:
    """The statement as PDF bytes; `unit_name` must be a business unit with usage or an empty one."""
    unit = report.total.children.get(unit_name) or Node(name=unit_name)
    styles = getSampleStyleSheet()
    buffer = BytesIO()
    document = SimpleDocTemplate(buffer, pagesize=A4, leftMargin=18 * mm, rightMargin=18 * mm, topMargin=16 * mm,
                                 bottomMargin=16 * mm, title=f"Chargeback {unit_name} {report.month}",
                                 author="Tessera")
    code = f" · cost centre {unit.code}" if unit.code else ""
    story = [
        Paragraph("GPU chargeback statement", styles["Title"]),
        Paragraph(f"<b>{unit_name}</b>{code} · {report.month.label} (UTC) · generated {generated:%Y-%m-%d %H:%M} UTC",
                  styles["Normal"]),
        Paragraph(_status(report), styles["Normal"]),
        Paragraph(f"Idle-cost policy: {report.idle_policy}. {escape(report.idle_statement)}", styles["Normal"]),
        Spacer(1, 5 * mm), _summary(unit, report), Spacer(1, 5 * mm), _chart(unit, report),
        Paragraph("By team and project", styles["Heading3"]), _detail(unit),
        *_notes(unit, styles),
        Paragraph("By tier and GPU model", styles["Heading3"]), _by_tier(unit),
        Paragraph("Rates in force", styles["Heading3"]), _rates(report),
        Spacer(1, 4 * mm),
        Paragraph("Cost = GPU-hours × the rate in force, split at month boundaries and rate changes; a MIG "
                  "instance counts its compute slices over its GPU's (7, or 4 on an A30). Each line is rounded "
                  "to the cent and totals are sums of lines.", styles["Italic"]),
    ]
    document.build(story)
    return buffer.getvalue()
