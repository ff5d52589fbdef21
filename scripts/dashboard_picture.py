"""Renders ops/grafana-dashboard.json's panels as one picture from a
Prometheus that scraped a real broker: each panel's queries are asked of
Prometheus's HTTP API over [START, END] and drawn as Grafana would lay
them out (its grid, its titles, a line per series).

usage: dashboard_picture.py PROMETHEUS_URL START END OUT.png"""

import json
import math
import sys
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def query_range(base, expr, start, end, step):
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{query}") as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise SystemExit(f"{expr}: {body}")
    return body["data"]["result"]


def label(metric, legend):
    if legend:
        # Grafana's {{name}} placeholders.
        for key, value in metric.items():
            legend = legend.replace("{{" + key + "}}", value)
        return legend
    shown = {k: v for k, v in metric.items() if k not in ("__name__", "instance", "job")}
    return ",".join(f"{k}={v}" for k, v in sorted(shown.items())) or "value"


def main():
    base, start, end, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    dashboard = json.load(open("ops/grafana-dashboard.json"))
    panels = dashboard["panels"]
    columns = 4
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(20, 3.4 * rows), squeeze=False)
    figure.suptitle(f"{dashboard['title']} (a broker under loadgen, scraped by Prometheus)", fontsize=14)
    for index, panel in enumerate(panels):
        ax = axes[index // columns][index % columns]
        ax.set_title(panel.get("title", ""), fontsize=10)
        drawn = 0
        for target in panel.get("targets", []):
            for series in query_range(base, target["expr"], start, end, 2):
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) if v not in ("NaN", "+Inf", "-Inf") else math.nan for _, v in series["values"]]
                ax.plot(times, values, label=label(series["metric"], target.get("legendFormat")))
                drawn += 1
        if drawn == 0:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        elif drawn <= 12:
            ax.legend(fontsize=6)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("seconds", fontsize=7)
    for index in range(len(panels), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(out, dpi=70)


if __name__ == "__main__":
    main()
