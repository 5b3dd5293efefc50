// packrun console: keeps the live parts of a page (the elements marked
// data-live) current by fetching the page again every data-refresh
// milliseconds and swapping those parts in. Without JavaScript the page
// is whole and a reload refreshes it; this only spares the reload.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  var note = document.getElementById("live");
  if (!(every > 0) || !window.fetch || !window.DOMParser || !note) {
    return;
  }
  function say(text) {
    note.hidden = false;
    note.textContent = text;
  }
  function stop(why) {
    say("Live refresh stopped: " + why + " Reload the page to resume.");
  }
  function tick() {
    if (document.hidden) {
      setTimeout(tick, every);
      return;
    }
    fetch(location.href, {credentials: "same-origin", redirect: "manual", headers: {"Accept": "text/html"}})
      .then(function (r) {
        if (r.type === "opaqueredirect") {
          throw new Error("the session ended (log in again).");
        }
        if (r.status === 429) {
          // Over the token's rate: skip a beat, as Retry-After asks.
          var wait = parseInt(r.headers.get("Retry-After") || "1", 10) * 1000;
          setTimeout(tick, Math.max(wait, every));
          return null;
        }
        if (r.status !== 200) {
          throw new Error("the page answered " + r.status + ".");
        }
        return r.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var parts = document.querySelectorAll("[data-live]");
        for (var i = 0; i < parts.length; i++) {
          var old = parts[i];
          // A part the operator is typing in is left alone.
          if (old.contains(document.activeElement) && document.activeElement !== document.body) {
            continue;
          }
          var now = fresh.getElementById(old.id);
          if (now) {
            old.replaceWith(document.adoptNode(now));
          }
        }
        say("Live: updated " + new Date().toLocaleTimeString() + ".");
        setTimeout(tick, every);
      })
      .catch(function (err) {
        stop(err.message);
      });
  }
  setTimeout(tick, every);
})();
