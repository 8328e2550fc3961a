// A small client for the web app's JSON endpoints (/api/...).
// Response shapes mirror webapp/runs/presenters.py.

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

// {id, state, active, elapsed_s, last_seq, activity, error_message, error_line}
export function fetchRunStatus(statusUrl) {
  return getJSON(statusUrl);
}

// {state, events: [{seq, type, data}]} for events with seq > after
export function fetchRunEvents(statusUrl, after = 0) {
  return getJSON(`${statusUrl}events/?after=${encodeURIComponent(after)}`);
}
