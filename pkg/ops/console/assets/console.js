// Follows a running job's progress on its page (#job[data-progress]),
// polling the console's JSON every second until the job ends. Nothing else:
// every page works without it.
"use strict";
(function () {
  const el = document.getElementById("job");
  if (!el) return;
  const url = el.dataset.progress;
  const set = (id, text) => { const n = document.getElementById(id); if (n) n.textContent = text; };
  async function poll() {
    let j;
    try {
      const r = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!r.ok) throw new Error(String(r.status));
      j = await r.json();
    } catch (e) {
      setTimeout(poll, 3000);
      return;
    }
    set("job-status", j.status + (j.cancel_requested && j.status === "running" ? " (cancel requested)" : ""));
    set("job-progress", Object.keys(j.progress || {}).sort().map((k) => k + " " + j.progress[k]).join(" "));
    set("job-steps", String(j.steps));
    set("job-error", j.error || "");
    if (j.status === "running") {
      setTimeout(poll, 1000);
    } else {
      const f = document.getElementById("cancel-form");
      if (f) f.remove();
    }
  }
  poll();
})();
