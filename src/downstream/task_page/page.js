// The taskgate task page: reads /tasks/events with fetch() and a stream reader (an
// EventSource cannot send Authorization), renders each snapshot, and cancels with
// POST /tasks/{id}/cancel. Every string from the server goes in through textContent.
"use strict";

const TOKEN_KEY = "taskgate-token";
const $ = (id) => document.getElementById(id);
let tasks = [];
let clockOffset = 0; // server time minus browser time, in ms
let stream = null;

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}

function setState(text, cls) {
  const s = $("state");
  s.textContent = text;
  s.className = "state " + (cls || "");
}

function showLogin(message) {
  $("board").hidden = true;
  $("login").hidden = false;
  const e = $("login-error");
  e.hidden = !message;
  e.textContent = message || "";
  setState("token needed", "down");
  $("token").focus();
}

function duration(ms) {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  const two = (big, bu, small, su) => big + bu + (small ? " " + small + su : "");
  if (m < 60) return two(m, "m", s % 60, "s");
  const h = Math.floor(m / 60);
  if (h < 48) return two(h, "h", m % 60, "m");
  return two(Math.floor(h / 24), "d", h % 24, "h");
}

function cell(tr, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function el(parent, tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  parent.appendChild(e);
  return e;
}

// A task's row, made once and updated in place afterwards: a snapshot does not replace the
// button a user is about to press.
function makeRow(id) {
  const tr = document.createElement("tr");
  tr.dataset.id = id;
  const tool = cell(tr, "tool");
  const r = { tr };
  r.tool = el(tool, "span", "name");
  r.up = el(tool, "span", "up");
  r.owner = cell(tr, "owner");
  r.badge = el(cell(tr, "status"), "span", "badge");
  const prog = cell(tr, "progress");
  r.bar = el(prog, "progress");
  r.msg = el(prog, "span", "msg");
  r.age = cell(tr, "num age");
  r.ttl = cell(tr, "num ttl");
  r.cancel = el(cell(tr, "act"), "button", "cancel");
  r.cancel.type = "button";
  r.cancel.textContent = "Cancel";
  r.cancel.addEventListener("click", () => cancel(id, r.cancel));
  tr.parts = r;
  return tr;
}

function fill(tr, t) {
  const r = tr.parts;
  const running = t.status === "working" || t.status === "input_required";
  tr.dataset.status = t.status;
  r.tool.textContent = t.tool || "(unknown tool)";
  r.up.textContent = t.upstream;
  r.owner.textContent = t.owner;
  r.badge.className = "badge " + t.status;
  r.badge.textContent = t.status.replace("_", " ");
  r.bar.hidden = !(running || t.progress != null);
  if (t.progress != null && t.total != null && t.total > 0) {
    r.bar.max = t.total;
    r.bar.value = Math.min(t.progress, t.total);
  } else {
    r.bar.removeAttribute("value"); // indeterminate
  }
  r.msg.textContent = t.statusMessage || "";
  r.msg.hidden = !t.statusMessage;
  r.age.dataset.created = t.createdAt;
  r.ttl.dataset.ttl = t.ttlMs;
  if (t.expiresAt != null) r.ttl.dataset.expires = t.expiresAt;
  else delete r.ttl.dataset.expires;
  r.cancel.hidden = !running;
  if (!running) r.cancel.disabled = true;
}

function render() {
  const body = $("tasks").querySelector("tbody");
  const old = new Map();
  for (const tr of body.children) old.set(tr.dataset.id, tr);
  const keep = new Set();
  let at = body.firstElementChild;
  for (const t of tasks) {
    let tr = old.get(t.id);
    if (!tr) tr = makeRow(t.id);
    fill(tr, t);
    keep.add(t.id);
    // In the snapshot's order, moving a row only when it is out of place.
    if (tr !== at) body.insertBefore(tr, at);
    else at = at.nextElementSibling;
  }
  for (const [id, tr] of old) if (!keep.has(id)) tr.remove();
  $("empty").hidden = tasks.length > 0;
  tick();
}

function tick() {
  const now = Date.now() + clockOffset;
  for (const td of document.querySelectorAll("td.age")) {
    td.textContent = duration(now - Number(td.dataset.created));
  }
  for (const td of document.querySelectorAll("td.ttl")) {
    if (td.dataset.expires) {
      td.textContent = "expires in " + duration(Number(td.dataset.expires) - now);
    } else {
      td.textContent = duration(Number(td.dataset.ttl)) + " after end";
    }
  }
}

async function cancel(id, button) {
  button.disabled = true;
  try {
    const r = await fetch("/tasks/" + encodeURIComponent(id) + "/cancel", {
      method: "POST",
      headers: headers({ "X-Taskgate-Page": "cancel" }),
    });
    if (r.status === 401) { showLogin("The token is no longer accepted."); return; }
    if (!r.ok) {
      let why = r.status + "";
      try { why = (await r.json()).error || why; } catch (_) { /* not JSON */ }
      setState("cancel failed: " + why, "down");
      button.disabled = false;
    }
  } catch (e) {
    setState("cancel failed: " + e, "down");
    button.disabled = false;
  }
}

function onSnapshot(data) {
  let snap;
  try { snap = JSON.parse(data); } catch (_) { return; }
  if (snap.error) { setState("the task store failed: " + snap.error, "down"); return; }
  clockOffset = snap.sentAt - Date.now();
  tasks = snap.tasks || [];
  const v = snap.viewer || {};
  let who;
  if (!v.auth) who = "Authentication is off: every task is shown.";
  else if (v.operator) who = "Signed in as " + v.principal + " (operator): every task is shown.";
  else who = "Signed in as " + v.principal + ": your tasks are shown.";
  $("who").textContent = who;
  $("truncated").hidden = !snap.truncated;
  $("login").hidden = true;
  $("board").hidden = false;
  setState("live", "live");
  render();
}

async function connect() {
  if (stream) stream.abort();
  const ctl = new AbortController();
  stream = ctl;
  setState("connecting…");
  let r;
  try {
    r = await fetch("/tasks/events", { headers: headers({ Accept: "text/event-stream" }), signal: ctl.signal });
  } catch (e) {
    if (ctl.signal.aborted) return;
    return retry("disconnected");
  }
  if (r.status === 401) {
    const had = token();
    sessionStorage.removeItem(TOKEN_KEY);
    return showLogin(had ? "That token is not accepted." : "");
  }
  if (!r.ok) {
    let why = r.status + "";
    try { why = (await r.json()).error || why; } catch (_) { /* not JSON */ }
    return retry(why);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (data) onSnapshot(data);
      }
    }
  } catch (_) {
    if (ctl.signal.aborted) return;
  }
  if (!ctl.signal.aborted) retry("disconnected");
}

function retry(why) {
  setState(why + " · retrying", "down");
  setTimeout(connect, 2000);
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("token").value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $("token").value = "";
    connect();
  });
  setInterval(tick, 1000);
  connect();
});
