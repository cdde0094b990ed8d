// meshroll fleet page: keeps the page's live part current without
// reloading. Every couple of seconds it fetches the same page with
// ?fragment=1 (only the part that changes, rendered and escaped by the
// server) and swaps it in; <details> the reader opened or closed stay as
// they were. It counts its updates on <body data-live-updates> and says on
// the header when the server stops answering. It sends nothing but GETs.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) {
    return;
  }
  var every = parseInt(live.getAttribute("data-every"), 10) || 2000;
  var conn = document.getElementById("conn");
  var updates = 0;
  var lastOK = Date.now();
  var toggled = {};

  // A <details> the reader toggled keeps its state across updates.
  live.addEventListener("toggle", function (e) {
    if (e.target && e.target.id) {
      toggled[e.target.id] = e.target.open;
    }
  }, true);

  function fragmentURL() {
    var u = new URL(window.location.href);
    u.searchParams.set("fragment", "1");
    u.hash = "";
    return u.toString();
  }

  function ages() {
    var now = Date.now();
    var els = live.querySelectorAll(".age[data-since]");
    for (var i = 0; i < els.length; i++) {
      var s = Math.max(0, Math.round((now - parseInt(els[i].getAttribute("data-since"), 10)) / 1000));
      els[i].textContent = (s < 120 ? s + "s" : Math.round(s / 60) + "m") + " ago";
    }
  }

  // utc writes a time as the server writes every time on the page
  // (15:04:05 UTC), whatever the browser's locale and zone: one clock on
  // one page.
  function utc(ms) {
    return new Date(ms).toISOString().slice(11, 19) + " UTC";
  }

  function say(ok, why) {
    if (!conn) {
      return;
    }
    if (ok) {
      conn.textContent = "live: updated " + utc(lastOK) + " (" + updates + " update" + (updates === 1 ? "" : "s") + ")";
      conn.classList.remove("down");
      document.body.classList.remove("disconnected");
    } else {
      conn.textContent = "not updating since " + utc(lastOK) + ": " + why;
      conn.classList.add("down");
      document.body.classList.add("disconnected");
    }
  }

  function tick() {
    fetch(fragmentURL(), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("the worker answered " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        for (var id in toggled) {
          var d = document.getElementById(id);
          if (d) {
            d.open = toggled[id];
          }
        }
        updates++;
        document.body.setAttribute("data-live-updates", String(updates));
        lastOK = Date.now();
        ages();
        say(true);
      })
      .catch(function (err) {
        say(false, err && err.message ? err.message : "no answer");
      })
      .then(function () {
        window.setTimeout(tick, every);
      });
  }

  window.setInterval(ages, 1000);
  window.setTimeout(tick, every);
})();
