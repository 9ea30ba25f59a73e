// kubectl plan ui, and the chart's UI server: the page. Its addresses are under `base`:
// "" for `kubectl plan ui` (one namespace), "/namespaces/NS" for the UI server (every namespace
// the user may read); the server's session (/api/session) says who the user is and whether
// actions are offered (the loopback UI is read-only). Every value the server sends is text written by users or by their
// steps (names, outputs, errors, prompts): it reaches the DOM through text nodes, textContent
// and setAttribute only (h() and svg() below), never as markup; links are built here from
// encodeURIComponent. The server's Content-Security-Policy allows no inline script.
"use strict";
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const app = document.getElementById("app");
  const where = document.getElementById("where");
  const LINE = 44; // characters of a line in a graph node
  // the run's report says its steps' outputs hold their stderr (the cluster could not split a log)
  const STDERR_IN_OUTPUT = "Step outputs hold what the steps wrote on stderr too: this cluster " +
    "cannot read a pod log's stdout and stderr apart (docs/operator.md, \"Step output\").";

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  function svg(tag, attrs, text) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    if (text !== undefined) el.textContent = text;
    return el;
  }

  const base = (location.pathname.match(/^\/namespaces\/[^/]+/) || [""])[0];
  const session = { actions: false };
  const planHref = (name) => base + "/plans/" + encodeURIComponent(name);
  const stepHref = (name, step) => planHref(name) + "/steps/" + encodeURIComponent(step);
  const api = (path) => base + "/api" + path;
  const cls = (status) => "st-" + String(status || "pending").replace(/[^a-z]/g, "-");
  const cut = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);
  const badge = (phase) => h("span", { class: "phase phase-" + String(phase).replace(/[^A-Za-z]/g, "") }, phase);
  const td = (text) => h("td", {}, text === null || text === undefined ? "" : text);
  const runHref = (name, run) => planHref(name) + (run.current ? "" : "/runs/" + encodeURIComponent(run.id));

  // The Plan's runs, newest first (its current run, then status.history): each opens its report.
  function runLinks(v) {
    if (v.runs.length < 2) return null;
    return h("p", { class: "runs", id: "runs" }, "Runs: ", v.runs.flatMap((r, i) => [
      i ? " · " : "",
      h("a", { href: runHref(v.name, r), "data-run": r.id, class: r.id === v.run ? "run shown" : "run" }, r.id),
      " ", badge(r.phase || "?"), r.current ? " (current)" : "",
    ]));
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => ({ error: `${r.status} ${r.statusText}` }));
    if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
    return body;
  }

  // An action (cancel, rerun, retry, answer) posted as the user: the server checks the session's
  // CSRF token and the page's Origin, and the cluster decides (its refusal is shown as it is).
  async function act(name, action, body, out) {
    out.textContent = "…";
    out.className = "muted";
    try {
      const r = await fetch(api(`/plans/${encodeURIComponent(name)}/${action}`), {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": session.csrf || "" },
        body: JSON.stringify(body),
      });
      const answer = await r.json().catch(() => ({ error: `${r.status} ${r.statusText}` }));
      out.textContent = r.ok ? answer.message : answer.error || `${r.status} ${r.statusText}`;
      out.className = r.ok ? "done" : "error";
    } catch (e) {
      out.textContent = e.message;
      out.className = "error";
    }
  }

  function planActions(v, out) {
    if (!session.actions || v.earlier) return null;
    const ended = ["Succeeded", "Failed"].includes(v.phase);
    const button = (label, action, body, cls) =>
      h("button", { type: "button", class: cls, onclick: () => act(v.name, action, body, out) }, label);
    return h("p", { class: "actions", id: "actions" },
      ended ? null : button("Cancel", "cancel", {}, "cancel"),
      ended ? null : button("Cancel, run finally steps", "cancel", { runFinally: true }, "cancel-finally"),
      button("Re-run", "rerun", {}, "rerun"),
      v.phase === "Failed" ? button("Retry", "retry", {}, "retry") : null,
      out);
  }

  // What the user typed into an answer form, by plan, step and field: the live updates redraw
  // the asks, and a redraw must not drop a half-typed answer (nor send an empty one).
  const typed = new Map();

  function answerForm(name, ask, out) {
    const key = (f) => `${name}\u0000${ask.stepId}\u0000${f}`;
    const inputs = (ask.fields.length ? ask.fields : []).map((f) =>
      h("label", {}, `${f} `, h("input", {
        type: "text", name: f, "data-field": f, value: typed.get(key(f)),
        oninput: (ev) => typed.set(key(f), ev.target.value),
      })));
    const values = () => Object.fromEntries(inputs.map((l) => {
      const i = l.querySelector("input");
      return [i.dataset.field, i.value];
    }));
    return h("p", { class: "answer-form" }, inputs,
      h("button", { type: "button", class: "answer", onclick: () => act(name, "answer", { step: ask.stepId, answer: values() }, out) }, "Answer"),
      h("button", { type: "button", class: "decline", onclick: () => act(name, "answer", { step: ask.stepId, decline: true }, out) }, "Decline"));
  }

  async function showSession() {
    try {
      Object.assign(session, await getJSON("/api/session"));
    } catch (e) {
      return;
    }
    if (!session.user) return;
    const header = document.querySelector("header");
    const ns = h("input", { type: "text", id: "namespace", size: 18, placeholder: "namespace" });
    const go = h("form", { id: "go", onsubmit: (ev) => {
      ev.preventDefault();
      if (ns.value) location.assign("/namespaces/" + encodeURIComponent(ns.value) + "/");
    } }, ns);
    const out = h("form", { method: "post", action: "/logout", id: "logout" },
      h("span", { id: "user" }, session.user), " ", h("button", { type: "submit" }, "Log out"));
    header.append(go, out);
  }

  // -- the list of Plans ---------------------------------------------------------------------

  async function showList() {
    document.title = "planops: plans";
    const draw = async () => {
      try {
        const data = await getJSON(api("/plans"));
        where.textContent = `namespace ${data.namespace}`;
        const head = ["Name", "Phase", "Steps", "Failed step", "Duration", "Created", "Parent"];
        const rows = data.items.map((p) =>
          h("tr", { "data-plan": p.name },
            h("td", {}, h("a", { href: planHref(p.name) }, p.name)),
            h("td", {}, badge(p.phase)), td(p.progress), td(p.failedStep), td(p.duration),
            td(p.created),
            h("td", {}, p.parent ? h("a", { href: planHref(p.parent.name) }, p.parent.name) : "")));
        app.replaceChildren(
          h("h1", {}, "Plans"),
          data.items.length
            ? h("table", { id: "plans" }, h("tr", {}, head.map((t) => h("th", {}, t))), rows)
            : h("p", { class: "muted" }, `No plans in namespace ${data.namespace}.`),
          h("p", { class: "muted" }, `Read ${new Date().toLocaleTimeString()}; read again every 5 s.`));
      } catch (e) {
        app.replaceChildren(h("p", { class: "error" }, e.message));
      }
    };
    await draw();
    setInterval(draw, 5000);
  }

  // -- one Plan ------------------------------------------------------------------------------

  function nodeLines(n) {
    const lines = [n.id, `${n.kind} ${n.what}`.trim()];
    if (n.body) {
      if (n.kind === "decide") lines.push(n.body.branch ? `ran ${n.body.branch}` : "branch not taken yet");
      else {
        const c = n.body.counts;
        const tally = ["success", "failed", "running", "pending"].filter((k) => c[k]).map((k) => `${c[k]} ${k}`);
        lines.push(`${n.body.items === null ? "?" : n.body.items} items` + (tally.length ? `: ${tally.join(", ")}` : ""));
      }
    }
    lines.push(n.attempts > 1 ? `${n.status} (${n.attempts} attempts)` : n.status);
    return lines.map((l) => cut(String(l), LINE));
  }

  function drawGraph(view, state, select) {
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 40, marginx: 14, marginy: 14 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const n of view.nodes) {
      const lines = nodeLines(n);
      const width = Math.min(340, Math.max(110, 18 + 7 * Math.max(...lines.map((l) => l.length))));
      g.setNode(n.id, { width, height: 14 + 16 * lines.length, lines, n });
    }
    for (const n of view.nodes) for (const d of n.deps) if (g.hasNode(d)) g.setEdge(d, n.id);
    // finally steps run once the main steps are over: dashed edges from the last main steps
    for (const n of view.nodes) for (const d of n.after || []) if (g.hasNode(d)) g.setEdge(d, n.id, { after: true });
    dagre.layout(g);
    const { width, height } = g.graph();
    const root = svg("svg", { id: "dag", width, height, viewBox: `0 0 ${width} ${height}` });
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#607d8b" }));
    const defs = svg("defs");
    defs.append(marker);
    root.append(defs);
    for (const e of g.edges()) {
      const pts = g.edge(e).points;
      root.append(svg("path", { class: g.edge(e).after ? "edge after" : "edge", "marker-end": "url(#arrow)", d: "M" + pts.map((p) => `${p.x},${p.y}`).join(" L") }));
    }
    for (const id of g.nodes()) {
      const box = g.node(id);
      const n = box.n;
      const classes = ["node", cls(n.status), n.body ? "body" : "", n.final ? "final" : "", state.selected === id ? "selected" : ""];
      const group = svg("g", {
        class: classes.join(" ").trim(), "data-step": id, "data-status": n.status,
        transform: `translate(${box.x - box.width / 2},${box.y - box.height / 2})`,
      });
      group.append(svg("title", {}, n.detail || n.status));
      group.append(svg("rect", { width: box.width, height: box.height, rx: 6 }));
      box.lines.forEach((line, i) => group.append(svg("text", { x: 9, y: 19 + 16 * i, class: i === 0 ? "id" : "" }, line)));
      group.addEventListener("click", () => select(id));
      root.append(group);
    }
    return root;
  }

  function field(dl, term, value) {
    if (value === null || value === undefined || value === "") return;
    dl.append(h("dt", {}, term), h("dd", {}, value));
  }

  function askBlock(ask, name, out) {
    return h("div", { class: "ask", "data-ask": ask.stepId },
      h("strong", {}, `Waiting for an answer: step ${ask.stepId}`),
      h("p", {}, ask.prompt || ""),
      ask.fields.length ? h("p", {}, "Fields: ", ask.fields.join(", ")) : null,
      h("p", {}, "Answer: ", h("code", { class: "answer" }, ask.answer)),
      h("p", {}, "or decline: ", h("code", {}, ask.decline)),
      h("p", { class: "muted" }, `until ${ask.deadline || "-"}, then whenUnanswered: ${ask.whenUnanswered}`),
      ask.rejected ? h("p", { class: "error" }, `last answer refused: ${ask.rejected}`) : null,
      session.actions && name ? answerForm(name, ask, out) : null);
  }

  function logButtons(state, step, attempts, load) {
    const wrap = h("span", {});
    wrap.append(h("button", { type: "button", class: "log", "data-log": step, onclick: () => load(step, null) }, "Log"));
    for (let a = 1; attempts > 1 && a <= attempts; a++) {
      wrap.append(h("button", { type: "button", onclick: () => load(step, a) }, `attempt ${a}`));
    }
    return wrap;
  }

  function detailPanel(view, state, load) {
    const n = view.nodes.find((x) => x.id === state.selected);
    if (!n) return [h("p", { class: "muted" }, "Select a step to see its attempts, output, error and log.")];
    const rec = view.records.find((r) => r.stepId === n.id) || {};
    const flying = view.inFlight.filter((f) => f.stepId === n.id).map((f) => `attempt ${f.attempt}`);
    const attempts = Number(rec.attempts || n.attempts || 0);
    const dl = h("dl", {});
    field(dl, "Status", n.status);
    field(dl, "Kind", n.kind);
    field(dl, "Runs", n.what);
    field(dl, "Depends on", n.deps.join(", "));
    field(dl, "When", n.final ? "finally: once the main steps are over" : "");
    field(dl, "Attempts", attempts ? String(attempts) : "");
    field(dl, "Running", flying.join(", "));
    field(dl, "Started", rec.startedAt);
    field(dl, "Finished", rec.finishedAt);
    field(dl, "Detail", n.detail);
    const out = [h("h2", {}, `Step ${n.id}`), dl,
      h("p", {}, h("a", { href: stepHref(view.name, n.id), id: "step-link" }, "link to this step"))];
    if (session.actions && !view.earlier && ["Succeeded", "Failed"].includes(view.phase) && !n.final) {
      out.push(h("p", {}, h("button", { type: "button", class: "retry-from", onclick: () => act(view.name, "retry", { from: n.id }, state.out) }, "Retry from this step")));
    }
    for (const f of view.refused.filter((x) => x.stepId === n.id)) {
      out.push(h("p", { class: "error" }, `attempt ${f.attempt} refused: ${f.error}`));
    }
    const ask = view.asks.find((a) => a.stepId === n.id);
    if (ask) out.push(askBlock(ask, view.earlier ? null : view.name, state.out));
    const children = view.children.filter((c) => c.step === n.id);
    if (children.length) {
      out.push(h("h2", {}, "Child plans"), h("ul", {}, children.map((c) =>
        h("li", {}, h("a", { href: planHref(c.name), class: "child" }, c.name), " ", badge(c.phase), " ", c.progress || ""))));
    }
    if (rec.error) out.push(h("h2", {}, "Error"), h("pre", { id: "error" }, rec.error));
    if (rec.output) out.push(h("h2", {}, "Output (recorded)"), h("pre", { id: "output" }, rec.output));
    if (rec.stderr) out.push(h("h2", {}, "Stderr (its last lines, recorded)"), h("pre", { id: "stderr" }, rec.stderr));
    const inner = view.records.filter((r) => (r.stepId || "").startsWith(n.id + "."));
    if (inner.length) {
      out.push(h("h2", {}, "Body steps"), h("table", {},
        h("tr", {}, ["Step", "Status", "Attempts", "Output or error", ""].map((t) => h("th", {}, t))),
        inner.map((r) => h("tr", {}, td(r.stepId), td(r.status), td(r.attempts),
          td(cut(String(r.error || r.output || ""), 80)), h("td", {}, view.earlier ? "" : logButtons(state, r.stepId, 1, load))))));
    }
    if (!view.earlier && ["shell", "script", "tool", "capsule"].includes(n.kind)) {
      out.push(h("h2", {}, "Log"), logButtons(state, n.id, attempts, load));
    }
    if (state.log && (state.log.step === n.id || state.log.step.startsWith(n.id + "."))) {
      const l = state.log;
      const what = l.error ? "" : l.data.source === "pod" ? `pod ${l.data.pod}`
        : l.data.source === "store" ? "stored log" : "recorded output";
      out.push(h("p", { class: "muted" }, `${l.step}${l.attempt ? ` attempt ${l.attempt}` : ""}: ${what}`,
        l.data && l.data.note ? ` (${l.data.note})` : ""));
      out.push(l.error ? h("p", { class: "error", id: "log-error" }, l.error) : h("pre", { id: "log" }, l.data.text));
    }
    return out;
  }

  async function showPlan(name, run, step) {
    document.title = run ? `planops: ${name}, run ${run}` : `planops: ${name}`;
    const out = h("span", { id: "action-result", class: "muted" });
    const state = { view: null, selected: step || null, log: null, updates: 0, out };
    const parts = {
      head: h("div", {}), asks: h("div", {}), graph: h("div", { class: "graph", id: "graph" }),
      detail: h("div", { class: "detail", id: "detail" }), live: h("span", { class: "live muted", id: "live" }, "connecting…"),
    };
    app.replaceChildren(parts.head, parts.asks, h("div", { class: "layout" }, parts.graph, parts.detail));

    const render = () => {
      const v = state.view;
      if (!v) return;
      where.textContent = `namespace ${v.namespace}`;
      const facts = [v.progress && `${v.progress} steps`, v.duration, v.run && `run ${v.run}`].filter(Boolean).join(" · ");
      parts.head.replaceChildren(...[
        h("p", {}, h("a", { href: base + "/" }, "← all plans"),
          v.parent ? [" · child of ", h("a", { href: planHref(v.parent.name), id: "parent" }, v.parent.name), ` (step ${v.parent.step || "?"})`] : null),
        h("h1", {}, `Plan ${v.name} `, badge(v.phase), parts.live),
        h("p", { class: "muted" }, facts, v.reason ? ` · ${v.reason}: ${v.message || ""}` : ""),
        runLinks(v),
        planActions(v, out),
        v.unreadable ? h("p", { class: "error" }, `its spec cannot be read: ${v.unreadable}`) : null,
        v.stderrInOutput ? h("p", { class: "muted", id: "stderr-in-output" }, STDERR_IN_OUTPUT) : null,
        v.errors.length ? h("ul", { class: "error" }, v.errors.map((e) =>
          h("li", {}, `[${e.code}] ${e.step ? `step ${e.step}, ` : ""}${e.path}: ${e.message}`))) : null,
      ].filter(Boolean));
      parts.asks.replaceChildren(...v.asks.map((a) => askBlock(a, v.earlier ? null : v.name, out)));
      parts.graph.replaceChildren(drawGraph(v, state, (id) => { state.selected = id; render(); }));
      parts.detail.replaceChildren(...detailPanel(v, state, load));
      document.body.setAttribute("data-phase", v.phase);
      document.body.setAttribute("data-updates", String(state.updates));
    };

    const load = async (step, attempt) => {
      const q = `step=${encodeURIComponent(step)}` + (attempt ? `&attempt=${attempt}` : "");
      try {
        state.log = { step, attempt, data: await getJSON(api(`/plans/${encodeURIComponent(name)}/log?${q}`)) };
      } catch (e) {
        state.log = { step, attempt, error: e.message };
      }
      render();
    };

    try {
      state.view = await getJSON(api(`/plans/${encodeURIComponent(name)}`) + (run ? `?run=${encodeURIComponent(run)}` : ""));
    } catch (e) {
      app.replaceChildren(h("p", {}, h("a", { href: base + "/" }, "← all plans")), h("p", { class: "error" }, e.message));
      return;
    }
    render();
    if (state.view.earlier) {  // an earlier run has ended: nothing of it changes, nothing to follow
      parts.live.textContent = "an earlier run";
      return;
    }
    const events = new EventSource(api(`/plans/${encodeURIComponent(name)}/watch`));
    events.addEventListener("plan", (ev) => {
      const view = JSON.parse(ev.data);
      parts.live.textContent = "● live";
      // The watch opens with the state just fetched: redrawing it anyway would replace the
      // buttons under a reader's pointer for nothing.
      if (JSON.stringify(view) === JSON.stringify(state.view)) return;
      state.view = view;
      state.updates += 1;
      render();
    });
    events.addEventListener("gone", () => {
      events.close();
      parts.live.textContent = "deleted";
    });
    events.addEventListener("problem", (ev) => {
      parts.live.textContent = JSON.parse(ev.data).error;
    });
    events.onerror = () => {
      if (parts.live.textContent !== "deleted") parts.live.textContent = "reconnecting…";
    };
  }

  // the address: a Plan, one of its runs (also `?run=`), a step of it; else the list
  const path = location.pathname.slice(base.length);
  const m = path.match(/^\/plans\/([^/]+)(?:\/(runs|steps)\/([^/]+))?$/);
  const part = (kind) => (m && m[2] === kind ? decodeURIComponent(m[3]) : null);
  showSession().then(() => {
    if (m) showPlan(decodeURIComponent(m[1]), part("runs") || new URLSearchParams(location.search).get("run"), part("steps"));
    else showList();
  });
})();
