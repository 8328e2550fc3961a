// Run page: while the run is queued or running, poll its status, tick the
// elapsed time, and reload the page once the run has ended (the server then
// renders the plan table or the error).
import { fetchRunStatus } from "./api.js";

const POLL_MS = 1000;

function formatDuration(seconds) {
  const s = Math.floor(seconds);
  const minutes = Math.floor(s / 60);
  return minutes ? `${minutes} min ${s % 60} s` : `${s} s`;
}

function start(summary) {
  const stateEl = document.getElementById("run-state");
  const elapsedEl = document.getElementById("run-elapsed");
  const activityEl = document.getElementById("run-activity");
  let elapsed = parseFloat(elapsedEl.dataset.seconds) || 0;
  let lastTick = performance.now();

  const tick = setInterval(() => {
    const now = performance.now();
    elapsed += (now - lastTick) / 1000;
    lastTick = now;
    elapsedEl.textContent = formatDuration(elapsed);
  }, 250);

  async function poll() {
    try {
      const status = await fetchRunStatus(summary.dataset.statusUrl);
      stateEl.textContent = status.state;
      stateEl.className = `state state-${status.state}`;
      if (activityEl) activityEl.textContent = status.activity;
      elapsed = status.elapsed_s;
      lastTick = performance.now();
      if (!status.active) {
        clearInterval(tick);
        window.location.reload();
        return;
      }
    } catch (err) {
      console.warn("run status poll failed", err);
    }
    setTimeout(poll, POLL_MS);
  }
  setTimeout(poll, POLL_MS);
}

const summary = document.getElementById("run-summary");
if (summary && summary.dataset.active === "true") start(summary);
