"use strict";
// Sortable tables: a click on a header sorts by that column (numbers by their data-v value),
// a second click reverses.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.querySelectorAll("thead th");
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = !th.classList.contains("asc");
      heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(asc ? "asc" : "desc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        if (!x || !y) return 0;
        var c;
        if (x.dataset.v !== undefined && y.dataset.v !== undefined) {
          c = parseFloat(x.dataset.v) - parseFloat(y.dataset.v);
        } else {
          c = x.textContent.localeCompare(y.textContent);
        }
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
// Flame graphs: each is an SVG document with its own script (zoom on click, search, reset),
// carried as data in the page and opened in a frame of its own (its ids and functions stay
// apart from the page's and the other graph's).
document.querySelectorAll(".flame[data-embed]").forEach(function (div) {
  var name = div.getAttribute("data-embed");
  var data = null;
  document.querySelectorAll("script.embed").forEach(function (s) {
    if (s.getAttribute("data-name") === name) data = s;
  });
  if (!data) return;
  var svg = JSON.parse(data.textContent);
  var frame = document.createElement("iframe");
  frame.title = name;
  var m = /<svg[^>]*\sheight="([0-9.]+)"/.exec(svg);
  frame.style.height = (m ? Math.ceil(parseFloat(m[1])) + 4 : 600) + "px";
  // Parsed as HTML, an SVG without a width would be 300 px wide: give it the frame's.
  frame.srcdoc = "<!DOCTYPE html><style>html,body{margin:0}svg{width:100%;min-width:600px;display:block}</style>" + svg;
  div.appendChild(frame);
});
