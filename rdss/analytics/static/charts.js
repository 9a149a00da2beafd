// Draws each <canvas data-chart="ID"> from the page's chart specifications: the JSON in
// <script type="application/json" id="chart-data"> (data, never run), a list of
// {id, title, type, labels, datasets, stacked}. Labels and values are text to Chart.js, which draws them
// on a canvas: nothing from a message becomes markup. Shared by rdss console and the report file.
(function () {
  "use strict";
  var island = document.getElementById("chart-data");
  if (!island || typeof Chart === "undefined") {
    return;
  }
  var specs = JSON.parse(island.textContent);
  var palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  Chart.defaults.animation = false; // screenshots and tests see the finished drawing at once
  specs.forEach(function (spec) {
    var canvas = document.querySelector('canvas[data-chart="' + spec.id + '"]');
    if (!canvas) {
      return;
    }
    var stacked = spec.stacked === true; // parts of one whole (codes of the errors), not figures side by side
    new Chart(canvas, {
      type: spec.type,
      data: {
        labels: spec.labels,
        datasets: spec.datasets.map(function (set, i) {
          var colour = palette[i % palette.length];
          return { label: set.label, data: set.data, backgroundColor: colour, borderColor: colour, fill: false };
        })
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        plugins: { title: { display: false } },
        scales: { x: { stacked: stacked }, y: { stacked: stacked, beginAtZero: true } }
      }
    });
    canvas.setAttribute("data-drawn", "true");
  });
})();
