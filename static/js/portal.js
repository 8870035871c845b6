/* Tessera portal: plotly charts, the 10 s refresh of dashboards and job pages, the sizing helper and queue drag-and-drop.
   Plain fetch, no framework; every write sends Django's CSRF token. */
"use strict";
window.Tessera = (function () {
  const layout = (title, extra) => Object.assign({
    title: { text: title, font: { size: 14 } }, margin: { l: 45, r: 15, t: 35, b: 35 }, height: 220,
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", showlegend: false,
  }, extra || {});
  const config = { displayModeBar: false, responsive: true };

  function csrf() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function gauge(usage) {
    const max = Math.max(usage.burst_limit, usage.in_use, 1);
    Plotly.newPlot("gauge", [{
      type: "indicator", mode: "gauge+number", value: usage.in_use,
      number: { suffix: " GPUs", valueformat: ".2f" },
      gauge: {
        axis: { range: [0, max] }, bar: { color: "#2f6fde" },
        steps: [{ range: [0, usage.guaranteed], color: "#e3ecfb" },
                { range: [usage.guaranteed, max], color: "#fdf0e4" }],
        threshold: { line: { color: "#1d2330", width: 3 }, value: usage.guaranteed },
      },
    }], layout("In use vs guaranteed (line) and burst", { height: 200, margin: { l: 25, r: 25, t: 40, b: 5 } }), config);
  }

  function charts(data) {
    gauge(data.usage);
    const a = data.allocation;
    Plotly.newPlot("allocation", [
      { x: a.x, y: a.y, type: "scatter", mode: "lines", line: { shape: "hv", color: "#2f6fde" }, fill: "tozeroy", name: "allocated" },
      { x: [a.x[0], a.x[a.x.length - 1]], y: [data.usage.guaranteed, data.usage.guaranteed], mode: "lines",
        line: { dash: "dot", color: "#1d2330" }, name: "guaranteed" },
    ], layout("GPU units allocated (dotted: guaranteed)", { yaxis: { rangemode: "tozero" } }), config);
    const u = data.utilisation;
    Plotly.newPlot("utilisation", [{ x: u.x, y: u.y, type: "bar", marker: { color: "#e07b39" }, name: "utilisation" }],
      layout(u.x.length ? "Measured GPU utilisation of the team's GPUs (%)" : "Measured GPU utilisation: no samples yet",
             { yaxis: { range: [0, 100] } }), config);
  }

  // Every 10 s while the tab is visible: the server renders the same fragments as on first paint,
  // so nothing changes format on refresh.
  function every10s(work) {
    setInterval(() => { if (!document.hidden) work().catch(() => {}); }, 10000);
  }

  async function refreshDashboard(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) return;
    const live = await response.json();
    document.getElementById("quota-stats").innerHTML = live.stats_html;
    gauge(live.usage);
    if (live.queue_html === undefined) return;  // this role sees usage, not jobs
    document.getElementById("running-body").innerHTML = live.running_html;
    document.getElementById("queue-body").innerHTML = live.queue_html;
    const running = live.usage.running;
    document.getElementById("running-count").textContent = running + " job" + (running === 1 ? "" : "s");
    document.getElementById("queue-count").textContent = live.usage.queued + " waiting";
    document.getElementById("queue-more").hidden = !live.more;
  }

  function dashboard(data, liveUrl) {
    charts(data);
    every10s(() => refreshDashboard(liveUrl));
  }

  async function refreshFragment(box) {
    const response = await fetch(box.dataset.url, { credentials: "same-origin" });
    if (response.ok) box.innerHTML = await response.text();
  }

  async function sizing(form, output, target, url) {
    const response = await fetch(url + "?" + new URLSearchParams(new FormData(form)), { credentials: "same-origin" });
    const body = await response.json();
    output.replaceChildren();
    if (!response.ok) {
      output.textContent = Object.entries(body).map(([k, v]) => k + ": " + v).join("; ");
      return;
    }
    const head = document.createElement("p");
    head.textContent = "Memory need: " + body.need_gb + " GiB. It will get:";
    const list = document.createElement("ul");
    body.fits.forEach((fit) => { const li = document.createElement("li"); li.textContent = fit.text; list.append(li); });
    output.append(head, list);
    if (target) target.value = body.need_gb;
  }

  function showError(table, text) {
    let box = document.getElementById("reorder-error");
    if (!box) {
      box = document.createElement("p");
      box.id = "reorder-error";
      box.className = "message error";
      box.setAttribute("role", "alert");
      table.before(box);
    }
    box.textContent = text + " Reload to see the queue as it is now.";
  }

  function priorities(table, url) {
    let dragged = null;
    let order = [];
    table.querySelectorAll("tbody tr[draggable]").forEach((row) => {
      row.addEventListener("dragstart", () => {
        dragged = row;
        order = [...table.querySelectorAll("tbody tr[data-job]")];
        row.classList.add("dragging");
      });
      row.addEventListener("dragend", () => row.classList.remove("dragging"));
      row.addEventListener("dragover", (e) => { e.preventDefault(); });
      row.addEventListener("drop", async (e) => {
        e.preventDefault();
        if (!dragged || dragged === row) return;
        row.parentNode.insertBefore(dragged, row);
        const ids = [...table.querySelectorAll("tbody tr[data-job]")].map((r) => Number(r.dataset.job));
        const response = await fetch(url, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
          body: JSON.stringify({ job_ids: ids }),
        });
        if (response.ok) {
          location.reload();
          return;
        }
        // Say why, and put the rows back as the server still has them.
        let why = "The new order was not saved (HTTP " + response.status + ").";
        try {
          const body = await response.json();
          why = "The new order was not saved: " + Object.values(body).flat().join(" ");
        } catch (error) { /* not JSON: keep the status */ }
        showError(table, why);
        order.forEach((r) => r.parentNode.appendChild(r));
      });
    });
  }

  // Job page: one line per GPU the job held; utilisation on 0-100 %, memory on 0 to the GPU's size.
  function jobCharts(series) {
    if (!series.length) return;
    const lines = (key) => series.map((gpu) => ({ x: gpu.x, y: gpu[key], type: "scatter", mode: "lines", name: gpu.name }));
    const legend = { showlegend: series.length > 1, legend: { orientation: "h", y: -0.25 } };
    Plotly.newPlot("job-util", lines("util"), layout("GPU utilisation (%)", Object.assign(
      { yaxis: { range: [0, 100], ticksuffix: "%" }, xaxis: { type: "date" } }, legend)), config);
    const top = Math.max(...series.map((gpu) => gpu.memory_gb));
    Plotly.newPlot("job-memory", lines("memory"), layout("GPU memory used (GiB, axis to the GPU's size)", Object.assign(
      { yaxis: { range: [0, top] }, xaxis: { type: "date" } }, legend)), config);
  }

  async function loadLogs(box) {
    try {
      const response = await fetch(box.dataset.url, { credentials: "same-origin" });
      // The fragment is rendered (and escaped) by Django, as on first paint.
      box.innerHTML = response.ok ? await response.text()
        : "<p class='log-problem'>Could not load the logs (HTTP " + response.status + ").</p>";
      box.querySelectorAll("pre.log").forEach((pre) => { pre.scrollTop = pre.scrollHeight; });  // newest in view
    } catch (error) {
      box.innerHTML = "<p class='log-problem'>Could not reach Tessera to load the logs.</p>";
    }
  }

  function jobPage(series, logsBox) {
    jobCharts(series);
    const live = document.getElementById("job-live");
    every10s(() => refreshFragment(live));
    loadLogs(logsBox);
    document.getElementById("logs-refresh").addEventListener("click", () => loadLogs(logsBox));
  }

  return { dashboard, sizing, priorities, jobPage };
})();
