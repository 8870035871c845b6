// What-if pages: follow a run's progress, then draw its comparison (plotly, loaded by the page).
window.TesseraWhatIf = (function () {
  "use strict";

  // Ask for the progress every second; when the run ends, load the page again: the server renders
  // the results (or the error) as on first paint.
  function follow(box) {
    const percent = document.getElementById("whatif-percent");
    const bar = document.getElementById("whatif-progress");
    const tick = async () => {
      try {
        const response = await fetch(box.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok) {
          const run = await response.json();
          if (run.state === "done" || run.state === "failed" || run.stale) { location.reload(); return; }
          percent.textContent = run.percent + "%";
          bar.value = run.percent;
        }
      } catch (error) { /* the server is restarting: try again */ }
      setTimeout(tick, 1000);
    };
    setTimeout(tick, 1000);
  }

  const config = { displaylogo: false, responsive: true };
  const colours = { baseline: "#8a94a6", changed: "#2f6fde" };

  function charts(data) {
    const lines = ["baseline", "changed"].flatMap((side) => [
      { x: data.t_h, y: data.allocation[side].map((v) => v * 100), type: "scatter", mode: "lines",
        name: (side === "baseline" ? "as is" : "changed") + ": allocated", line: { color: colours[side] } },
      { x: data.t_h, y: data.useful[side].map((v) => v * 100), type: "scatter", mode: "lines",
        name: (side === "baseline" ? "as is" : "changed") + ": useful", line: { color: colours[side], dash: "dot" } },
    ]);
    Plotly.newPlot("whatif-allocation", lines, {
      title: { text: "GPUs allocated (solid) and doing useful work (dotted), % of the cluster", font: { size: 14 } },
      xaxis: { title: { text: "hours into the replay" }, rangemode: "tozero" },
      yaxis: { range: [0, 105], ticksuffix: "%" }, legend: { orientation: "h", y: -0.25 },
      margin: { l: 50, r: 10, t: 40, b: 70 }, height: 360,
    }, config);
    const bars = ["baseline", "changed"].map((side) => ({
      x: data.teams, y: data.wait_min[side], type: "bar", name: side === "baseline" ? "as is" : "changed",
      marker: { color: colours[side] },
    }));
    Plotly.newPlot("whatif-teams", bars, {
      title: { text: "Wait to first start per team, p95 (minutes)", font: { size: 14 } }, barmode: "group",
      yaxis: { rangemode: "tozero", title: { text: "minutes" } }, legend: { orientation: "h", y: -0.2 },
      margin: { l: 50, r: 10, t: 40, b: 60 }, height: 340,
    }, config);
  }

  return { follow: follow, charts: charts };
})();
