// Live updates for the dashboard, served by the dashboard itself (no build step, no CDN).
// Every few seconds the page is fetched again and each element marked data-live is replaced
// by its namesake (same id) from the fresh copy: the server renders once, for the first load
// and for every update alike. Why not SSE: a poll needs no long-lived connection per tab
// through the thread pool, and stops by itself when the tab is hidden. An update is skipped
// while a form inside a live element has focus, so typing is never lost.
(function () {
  "use strict";
  var regions = document.querySelectorAll("[data-live]");
  if (!regions.length) { return; }
  var every = parseInt(document.body.getAttribute("data-live-every") || "3000", 10);
  var status = document.getElementById("live-status");
  window.tetherLiveUpdates = 0;

  function busy() {
    var active = document.activeElement;
    return !!(active && active.closest && active.closest("[data-live] form"));
  }

  function tick() {
    if (document.hidden || busy()) { setTimeout(tick, every); return; }
    fetch(location.href, {headers: {"X-Tether-Live": "1"}, credentials: "same-origin"})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var next = fresh.getElementById(el.id);
          if (next) { el.replaceWith(document.importNode(next, true)); }
        });
        window.tetherLiveUpdates += 1;
        if (status) { status.textContent = "live, updated " + new Date().toLocaleTimeString(); }
      })
      .catch(function (err) { if (status) { status.textContent = "live updates paused: " + err.message; } })
      .then(function () { setTimeout(tick, every); });
  }
  if (status) { status.textContent = "live"; }
  setTimeout(tick, every);
})();
