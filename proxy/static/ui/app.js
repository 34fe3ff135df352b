// The areamem inspector: plain JavaScript, no build step, nothing from another origin.
//
// Every datum comes from the /memory API of this origin, called with the key kept in this
// tab's sessionStorage. Stored memory is hostile (a fragment may hold "<script>"): text
// from the API only ever enters the page as text nodes, attribute values or SVG text,
// never as markup (no HTML-parsing sink anywhere). Every API error is shown in its panel.
"use strict";

(() => {
  const KEY_STORE = "areamem.key";
  const KIND_COLOURS = {
    fragment: "#4e79a7",
    context: "#f28e2b",
    entity: "#e15759",
    word: "#76b7b2",
    session: "#59a14f",
  };
  const FOCUS_COLOURS = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
  ];
  const EDGE_STYLES = {
    mentions: ["solid", "#9c755f"],
    in_context: ["dashed", "#f28e2b"],
    relation: ["solid", "#e15759"],
    next: ["dotted", "#4e79a7"],
    answers: ["solid", "#4e79a7"],
    corrects: ["solid", "#b07aa1"],
    depends_on: ["dashed", "#4e79a7"],
    in_session: ["dotted", "#59a14f"],
    at_time: ["dotted", "#bab0ac"],
    is_a: ["dashed", "#e15759"],
    uses_term: ["dotted", "#76b7b2"],
    related_context: ["dashed", "#f28e2b"],
  };
  const OTHER_EDGE = ["solid", "#999999"];

  const $ = (id) => document.getElementById(id);
  const state = { question: null, snapshots: [], pendingRollback: null, expanded: false };

  // --- DOM: text in as text -------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  const norm = (text) => String(text ?? "").replace(/\s+/g, " ").trim().toLowerCase();
  const cut = (text, n) => {
    const s = String(text ?? "");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  };
  const num = (x, digits = 3) => (typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "–");
  const score = (x) =>
    typeof x === "number" && isFinite(x) ? (x !== 0 && Math.abs(x) < 0.01 ? x.toExponential(2) : x.toFixed(3)) : "–";
  // A stored time (epoch seconds) as a person's local date and time.
  const LOCAL_TIME = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const when = (seconds) =>
    typeof seconds === "number" && isFinite(seconds) ? LOCAL_TIME.format(new Date(seconds * 1000)) : "unknown time";

  // --- the API ----------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    toString() {
      const head = this.status ? `${this.status}${this.code ? " " + this.code : ""}` : this.code;
      return `${head}: ${this.message}`;
    }
  }

  async function api(path, options = {}) {
    const headers = new Headers();
    const key = sessionStorage.getItem(KEY_STORE);
    if (key) headers.set("Authorization", "Bearer " + key);
    const init = { method: options.method || "GET", headers, credentials: "omit", cache: "no-store" };
    if (options.body !== undefined) {
      headers.set("Content-Type", "application/json");
      init.body = JSON.stringify(options.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, "network", `${path}: the proxy could not be reached (${err.message})`);
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const error = body && typeof body === "object" ? body.error : null;
      const message =
        error && typeof error.message === "string" ? error.message : cut(text, 300) || response.statusText;
      throw new ApiError(response.status, error && error.code ? String(error.code) : "", message);
    }
    if (body === null || typeof body !== "object") {
      throw new ApiError(response.status, "not_json", `${path}: the answer is not a JSON object`);
    }
    return body;
  }

  const query = (params) => new URLSearchParams(params).toString();

  function showError(id, err) {
    const box = $(id);
    box.textContent = err instanceof ApiError ? err.toString() : `error: ${err && err.message ? err.message : err}`;
    box.hidden = false;
  }

  function hideError(id) {
    const box = $(id);
    box.textContent = "";
    box.hidden = true;
  }

  async function guarded(errorId, work) {
    hideError(errorId);
    try {
      await work();
    } catch (err) {
      showError(errorId, err);
    }
  }

  // --- the key ----------------------------------------------------------------------------

  function showKeyState() {
    $("key-state").textContent = sessionStorage.getItem(KEY_STORE)
      ? "key set (this tab only)"
      : "no key (auth.mode open needs none)";
  }

  function useKey(event) {
    event.preventDefault();
    const key = $("key").value.trim();
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
    $("key").value = "";
    showKeyState();
    refreshAll();
    if (state.question) search(null, { push: false });
  }

  function forgetKey() {
    sessionStorage.removeItem(KEY_STORE);
    $("key").value = "";
    showKeyState();
  }

  // --- a block of injected text with its citations ----------------------------------------

  // A view pairs an injected block with the fragments its citations name; the search's
  // view also selects the fragment's node in the graph.
  function makeView(pre, list, onSelect) {
    return { pre, list, onSelect, citations: new Map() };
  }

  function renderBlock(view, text, citations) {
    view.citations = citations;
    clear(view.pre);
    const pattern = /\[(\d+)\]/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      const number = Number(match[1]);
      if (match.index > last) view.pre.append(text.slice(last, match.index));
      const fragment = citations.get(number);
      const link = el(
        "a",
        {
          href: `#${view.list.id}`,
          class: fragment === undefined ? "citation unknown" : "citation",
          title: fragment === undefined ? "no fragment found for this citation" : `fragment ${fragment}`,
          dataset: { citation: String(number), fragmentId: fragment === undefined ? "" : String(fragment) },
        },
        match[0]
      );
      link.addEventListener("click", (event) => {
        event.preventDefault();
        selectFragment(view, fragment, number);
      });
      view.pre.append(link);
      last = match.index + match[0].length;
    }
    if (last < text.length) view.pre.append(text.slice(last));
    if (!text) view.pre.append(el("span", { class: "muted" }, "(nothing would be injected)"));
  }

  function fragmentItem(fragment, extra) {
    const who = fragment.speaker || fragment.role || "unknown";
    return el(
      "li",
      { class: "fragment", dataset: { fragmentId: String(fragment.id) } },
      el(
        "div",
        { class: "meta" },
        el("strong", {}, `#${fragment.id}`),
        ` ${who} · ${fragment.conversation_label ?? fragment.conversation_id ?? "?"} · ${when(fragment.ts)}`,
        fragment.score !== undefined ? ` · score ${score(fragment.score)}` : "",
        extra || ""
      ),
      el("p", { class: "text" }, fragment.text ?? "")
    );
  }

  function selectFragment(view, fragment, number) {
    for (const node of view.list.querySelectorAll(".selected")) node.classList.remove("selected");
    for (const node of view.pre.querySelectorAll("a.citation.active")) node.classList.remove("active");
    for (const node of view.pre.querySelectorAll(`a.citation[data-citation="${CSS.escape(String(number))}"]`)) {
      node.classList.add("active");
    }
    if (fragment === undefined) return;
    let item = view.list.querySelector(`li[data-fragment-id="${CSS.escape(String(fragment))}"]`);
    if (!item) {
      item = el(
        "li",
        { class: "fragment missing", dataset: { fragmentId: String(fragment) } },
        el("div", { class: "meta" }, el("strong", {}, `#${fragment}`), " cited, not among the hits")
      );
      view.list.append(item);
    }
    item.classList.add("selected");
    item.scrollIntoView({ block: "nearest" });
    if (view.onSelect) view.onSelect(fragment);
  }

  // [n] -> fragment id. The API's own map when it gives one; else read from the block's
  // numbered fragment lines ("[n] Speaker: text", sentences elided as "…"), each matched to
  // the fragment whose text holds every kept piece (the speaker breaks ties).
  function citationMap(given, text, candidates) {
    const map = new Map();
    if (Array.isArray(given)) {
      for (const c of given) map.set(c.number, c.fragment_id);
      return map;
    }
    let inFragments = false;
    for (const line of text.split("\n")) {
      if (line === "Fragments:") inFragments = true;
      else if (line === "Notes:") inFragments = false;
      const m = /^\[(\d+)\] (.*)$/.exec(line);
      if (!m || !inFragments) continue;
      const id = matchLine(m[2], candidates);
      if (id !== null) map.set(Number(m[1]), id);
    }
    return map;
  }

  function matchLine(body, candidates) {
    const line = body.replace(/ \(corrected by \[\d+\](?:, \[\d+\])*\)$/, "");
    const colon = line.indexOf(": ");
    const label = colon >= 0 ? norm(line.slice(0, colon)) : "";
    const said = colon >= 0 ? line.slice(colon + 2) : line;
    const pieces = said.split("…").map(norm).filter((p) => p.length > 0);
    let best = null;
    let bestScore = 0;
    for (const c of candidates) {
      const text = norm(c.text);
      const holds = c.prefix
        ? pieces.length > 0 && (pieces[0].startsWith(text) || text.startsWith(pieces[0]))
        : pieces.every((p) => text.includes(p));
      if (!holds) continue;
      const score = 1 + (norm(c.label) === label ? 2 : 0) + (c.prefix ? 0 : 1);
      if (score > bestScore) {
        best = c.id;
        bestScore = score;
      }
    }
    return best;
  }

  // --- search -----------------------------------------------------------------------------

  const searchView = () =>
    state.searchView || (state.searchView = makeView($("context"), $("fragments"), selectNode));

  // A search from the form is a new entry of the tab's history (the question in the
  // address: back and forward go through searches); one restored from the address is not.
  async function search(event, { push = true } = {}) {
    if (event) event.preventDefault();
    const question = $("q").value;
    if (!question.trim()) return;
    const k = $("k").value || "8";
    state.question = question;
    state.expanded = false;
    state.selectedNode = undefined;
    writeAddress(push);
    hideError("search-error");
    hideError("area-error");
    const ticket = (state.searches = (state.searches || 0) + 1);
    $("graph").dataset.state = "loading";
    const params = query({ q: question, k });
    const [found, area] = await Promise.allSettled([
      api(`/memory/search?${params}`),
      api(`/memory/area?${params}`),
    ]);
    if (ticket !== state.searches) return;  // a later search (back, forward) answers instead
    const explained = area.status === "fulfilled" ? area.value : null;
    if (found.status === "fulfilled") showSearch(found.value, explained);
    else {
      showError("search-error", found.reason);
      clear($("context"));
      clear($("fragments"));
    }
    if (explained) drawArea(explained);
    else {
      showError("area-error", area.reason);
      drawArea(null);
    }
  }

  function showSearch(found, explained) {
    const view = searchView();
    const ranked = new Map(((explained && explained.fragments) || []).map((f) => [f.id, f]));
    clear(view.list);
    for (const hit of found.hits) {
      const fragment = { ...hit, id: hit.fragment_id };
      const terms = ranked.get(hit.fragment_id);
      const extra = terms
        ? " · area " + Object.entries(terms.terms).map(([t, v]) => `${t} ${num(v, 2)}`).join(", ")
        : "";
      view.list.append(fragmentItem(fragment, extra));
    }
    if (!found.hits.length) view.list.append(el("li", { class: "muted" }, "no fragment found"));
    const candidates = found.hits.map((h) => ({ id: h.fragment_id, label: h.speaker || h.role, text: h.text }));
    for (const node of (explained && explained.area && explained.area.nodes) || []) {
      if (node.kind !== "fragment") continue;
      const colon = node.label.indexOf(": ");
      candidates.push({
        id: node.id,
        label: colon >= 0 ? node.label.slice(0, colon) : "",
        text: (colon >= 0 ? node.label.slice(colon + 2) : node.label).replace(/…$/, ""),
        prefix: true,
      });
    }
    renderBlock(view, found.context, citationMap(found.citations, found.context, candidates));
    $("context-meta").textContent =
      `${found.tokens} tokens · ${found.hits.length} fragments · terms: ${found.terms.join(", ")} · ${num(found.elapsed_ms, 1)} ms`;
  }

  // --- the area ---------------------------------------------------------------------------
  //
  // Drawn as columns a person reads left to right: the question's foci, the nodes that link
  // them (entities, words, contexts, sessions), the representative, and the fragments by
  // score. Each column is a list: nodes one row apart, labels (HTML, so they keep their
  // size and end in an ellipsis) no wider than the gap to the next column, so no two
  // labels can overlap. At most MAX_SHOWN nodes are drawn; the rest fold into "+N more".

  const MAX_SHOWN = 24;
  const MAX_FRAGMENTS = 10;
  const ROW = 30;
  const TOP = 34;
  const TYPE_WORDS = { PER: "person", LOC: "place", ORG: "organisation" };
  const FOCUS_WORDS = { bm25: "the question's words (BM25)", dense: "the question's meaning" };
  const COLUMNS = [
    ["foci", 0.02],
    ["linking", 0.25],
    ["representative", 0.5],
    ["fragments by score", 0.68],
  ];
  const SVG = "http://www.w3.org/2000/svg";

  const typeWord = (n) => TYPE_WORDS[n.type] || "";
  const fullLabel = (n) => {
    if (n.kind === "fragment") return `${n.label}${n.conversation_label ? " — " + n.conversation_label : ""}`;
    const type = typeWord(n);
    return type ? `${n.label} (${type})` : n.label;
  };
  const focusText = (f) => FOCUS_WORDS[f] || f.replace(/^word:/, "word “").replace(/^entity:/, "") +
    (f.startsWith("word:") ? "”" : "");

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    for (const child of children) node.append(child);
    return node;
  }

  // Every node of the area with what the drawing needs: activation, dominant focus, score.
  function areaNodes(explained) {
    const area = explained.area;
    const ranked = new Map((explained.fragments || []).map((f) => [f.id, f.score]));
    const totals = area.nodes.map((n) => Object.values(n.per_focus).reduce((a, b) => a + b, 0));
    const top = Math.max(...totals, 1e-12);
    return area.nodes.map((n, i) => {
      const [dominant, strongest] = Object.entries(n.per_focus).reduce((a, b) => (b[1] > a[1] ? b : a), ["", -1]);
      const focusIndex = explained.foci.indexOf(dominant);
      return {
        ...n,
        total: totals[i],
        activation: totals[i] / top,
        share: totals[i] > 0 ? strongest / totals[i] : 0,
        dominant,
        score: n.kind === "fragment" ? ranked.get(n.id) ?? null : null,
        rep: n.node === area.representative.node,
        colour: KIND_COLOURS[n.kind] || "#999999",
        ring: focusIndex >= 0 ? FOCUS_COLOURS[focusIndex % FOCUS_COLOURS.length] : "#333333",
        fragment: n.kind === "fragment" ? n.id : null,
      };
    });
  }

  // The node standing for each focus: the word or entity it names when the area holds it,
  // else a drawn anchor of its own (BM25, dense) tied to the node it activated most.
  function focusAnchors(explained, nodes) {
    return explained.foci.map((focus, i) => {
      const [kind, name] = focus.includes(":") ? focus.split(/:(.*)/s) : ["", ""];
      const found = nodes.find((n) => n.kind === kind && norm(n.label) === norm(name));
      const colour = FOCUS_COLOURS[i % FOCUS_COLOURS.length];
      if (found) return { focus, node: found, colour };
      const candidates = nodes.filter((n) => !n.rep);
      const strongest = candidates.length
        ? candidates.reduce((a, b) => ((b.per_focus[focus] || 0) > (a.per_focus[focus] || 0) ? b : a))
        : null;
      return { focus, node: null, colour, strongest };
    });
  }

  // Which nodes are drawn: the representative, the foci, the best fragments, the most
  // activated others; everything when expanded.
  function chooseShown(nodes, anchors, expanded) {
    if (expanded) return new Set(nodes.map((n) => n.node));
    const shown = new Set();
    const add = (n) => shown.size < MAX_SHOWN && shown.add(n.node);
    for (const n of nodes) if (n.rep) shown.add(n.node);
    for (const a of anchors) if (a.node) add(a.node);
    const byScore = (a, b) => (b.score ?? b.activation) - (a.score ?? a.activation);
    const fragments = nodes.filter((n) => n.kind === "fragment").sort(byScore);
    for (const n of fragments.slice(0, MAX_FRAGMENTS)) add(n);
    for (const a of anchors) if (a.strongest) add(a.strongest);
    const others = nodes.filter((n) => n.kind !== "fragment").sort((a, b) => b.activation - a.activation);
    for (const n of [...others, ...fragments]) add(n);
    return shown;
  }

  function columnOf(n, anchored) {
    if (n.rep) return 2;
    if (anchored.has(n.node)) return 0;
    return n.kind === "fragment" ? 3 : 1;
  }

  // Positions: each column a list from the top, best first; the representative centred.
  function layout(nodes, anchors, shown, width) {
    const anchored = new Set(anchors.filter((a) => a.node && !a.node.rep).map((a) => a.node.node));
    state.anchored = anchored;
    const columns = [[], [], [], []];
    const drawn = nodes.filter((n) => shown.has(n.node));
    const byWeight = (a, b) => (b.score ?? b.activation) - (a.score ?? a.activation);
    for (const n of drawn.sort(byWeight)) columns[columnOf(n, anchored)].push(n);
    const virtual = anchors.filter((a) => !a.node).map((a) => ({ virtual: true, focus: a.focus, colour: a.colour, strongest: a.strongest }));
    const real = [...new Set(anchors.filter((a) => a.node && !a.node.rep).map((a) => a.node))];
    columns[0] = [...real, ...virtual];
    const rows = Math.max(...columns.map((c) => c.length), 3);
    const height = TOP + rows * ROW + 20;
    const place = new Map();
    columns.forEach((column, c) => {
      const x = Math.round(COLUMNS[c][1] * width) + 14;
      const next = c + 1 < COLUMNS.length ? Math.round(COLUMNS[c + 1][1] * width) : width;
      const start = c === 2 ? TOP + Math.max(0, Math.floor((rows - column.length) / 2)) * ROW : TOP;
      column.forEach((n, i) => place.set(n.virtual ? `f:${n.focus}` : n.node, { x, y: start + i * ROW + ROW / 2, room: next - x - 26, n }));
    });
    return { columns, place, height };
  }

  function radius(n) {
    if (n.virtual) return 7;
    return n.rep ? 13 : 5 + Math.round(7 * Math.sqrt(n.activation));
  }

  // Shortest paths (over the drawn edges) from each focus to the representative: the
  // edges drawn strong.
  function pathEdges(edges, sources, target) {
    const next = new Map();
    edges.forEach((e, i) => {
      for (const [a, b] of [[e.from, e.to], [e.to, e.from]]) {
        if (!next.has(a)) next.set(a, []);
        next.get(a).push([b, i]);
      }
    });
    const marked = new Set();
    for (const source of sources) {
      const back = new Map([[source, null]]);
      const queue = [source];
      while (queue.length && !back.has(target)) {
        const at = queue.shift();
        for (const [to, i] of next.get(at) || []) {
          if (!back.has(to)) {
            back.set(to, [at, i]);
            queue.push(to);
          }
        }
      }
      for (let step = back.get(target); step; step = back.get(step[0])) marked.add(step[1]);
    }
    return marked;
  }

  function drawnEdges(explained, place, anchors) {
    const seen = new Set();
    const edges = [];
    for (const e of explained.area.edges) {
      const key = [Math.min(e.src, e.dst), Math.max(e.src, e.dst), e.type].join(":");
      if (!place.has(e.src) || !place.has(e.dst) || e.src === e.dst || seen.has(key)) continue;
      seen.add(key);
      edges.push({ from: e.src, to: e.dst, type: e.type });
    }
    for (const a of anchors) {
      if (!a.node && a.strongest && place.has(a.strongest.node)) {
        edges.push({ from: `f:${a.focus}`, to: a.strongest.node, type: "focus" });
      }
    }
    return edges;
  }

  // The edges drawn by default: the paths from the foci, and each node's one edge to its
  // most activated neighbour (the representative first): a skeleton of the area, not its
  // every edge ("draw every edge" in the legend shows them all).
  function treeEdges(edges, place, strong) {
    const best = new Map();
    edges.forEach((e, i) => {
      for (const [a, b] of [[e.from, e.to], [e.to, e.from]]) {
        const n = place.get(b).n;
        const weight = n.virtual ? 0 : n.rep ? 2 : n.activation;
        if (!best.has(a) || weight > best.get(a)[1]) best.set(a, [i, weight]);
      }
    });
    return new Set([...strong, ...[...best.values()].map(([i]) => i)]);
  }

  function edgePath(p, q) {
    if (Math.abs(p.x - q.x) < 4) {  // same column: an arc left of it, away from the labels
      const bend = Math.min(60, 12 + Math.abs(q.y - p.y) / 4);
      return `M${p.x},${p.y} C${p.x - bend},${p.y} ${q.x - bend},${q.y} ${q.x},${q.y}`;
    }
    const [a, b] = p.x < q.x ? [p, q] : [q, p];
    const mid = (a.x + b.x) / 2;
    return `M${a.x},${a.y} C${mid},${a.y} ${mid},${b.y} ${b.x},${b.y}`;
  }

  function drawArea(explained) {
    const box = $("graph");
    state.explained = explained;
    clear(box);
    clear($("area-nodes"));
    clear($("legend"));
    $("graph-detail").textContent = "";
    box.dataset.selectedFragment = "";
    if (!explained || !explained.area) {
      box.dataset.state = explained ? "none" : "error";
      box.dataset.nodeCount = box.dataset.edgeCount = box.dataset.shownCount = "0";
      $("area-summary").textContent = explained
        ? `No area: the question's foci (${explained.foci.map(focusText).join(", ") || "none"}) reach nothing in memory.`
        : "";
      return;
    }
    const nodes = areaNodes(explained);
    state.areaNodes = new Map(nodes.map((n) => [n.node, n]));
    listNodes(nodes);
    summarise(explained);
    render(explained, nodes);
  }

  function render(explained, nodes) {
    const box = clear($("graph"));
    const anchors = focusAnchors(explained, nodes);
    const shown = chooseShown(nodes, anchors, state.expanded);
    const width = Math.max(box.clientWidth - 18, 640);
    const { columns, place, height } = layout(nodes, anchors, shown, width);
    const edges = drawnEdges(explained, place, anchors);
    const rep = (nodes.find((n) => n.rep) || nodes[0]).node;
    const sources = anchors.map((a) => (a.node ? a.node.node : `f:${a.focus}`));
    const strong = pathEdges(edges, sources, rep);
    const kept = state.allEdges ? new Set(edges.keys()) : treeEdges(edges, place, strong);
    const picture = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
    COLUMNS.forEach(([title, at]) =>
      picture.append(svg("text", { x: Math.round(at * width) + 6, y: 16, class: "column-title" }, title)));
    edges.forEach((e, i) => {
      if (!kept.has(i)) return;
      const [line, colour] = e.type === "focus" ? ["dotted", "#555555"] : EDGE_STYLES[e.type] || OTHER_EDGE;
      const dash = line === "dashed" ? "6 4" : line === "dotted" ? "2 3" : "none";
      picture.append(svg("path", {
        d: edgePath(place.get(e.from), place.get(e.to)),
        class: strong.has(i) ? "edge path" : "edge",
        stroke: colour,
        "stroke-dasharray": dash,
        "data-type": e.type,
      }));
    });
    box.append(picture);
    for (const { x, y, room, n } of place.values()) drawNode(box, picture, n, x, y, room);
    const hidden = nodes.length - shown.size;
    if (hidden > 0 || state.expanded) drawMore(box, hidden, width, height);
    drawLegend(explained, edges.filter((_, i) => kept.has(i)), anchors, edges.length);
    box.dataset.nodeCount = String(nodes.length);
    box.dataset.shownCount = String(shown.size);
    box.dataset.edgeCount = String(kept.size);
    box.dataset.pathEdges = String(strong.size);
    box.dataset.question = explained.query;
    box.dataset.state = "drawn";
    if (state.selectedNode !== undefined) markNode(state.selectedNode);
  }

  function drawNode(box, picture, n, x, y, room) {
    const r = radius(n);
    const colour = n.virtual ? "#ffffff" : n.colour;
    const ring = n.virtual ? n.colour : n.ring;
    const group = svg("g", { class: "node", "data-node": n.virtual ? n.focus : n.node });
    if (n.rep) group.append(svg("circle", { cx: x, cy: y, r: r + 5, fill: "none", stroke: "#1d2330", "stroke-width": 2 }));
    group.append(svg("circle", {
      cx: x, cy: y, r, class: "body", fill: colour, stroke: ring,
      "stroke-width": n.virtual ? 3 : 1.5 + 3 * (n.share || 0),
      "fill-opacity": n.virtual ? 1 : 0.45 + 0.55 * n.activation,
    }));
    const text = n.virtual ? focusText(n.focus) : n.kind === "fragment" ? n.label : n.label;
    const full = n.virtual ? `focus: ${focusText(n.focus)}` : `${n.kind}: ${fullLabel(n)}`;
    group.append(svg("title", {}, full));
    picture.append(group);
    const label = el("div", {
      class: `glabel${n.rep ? " rep" : ""}${n.virtual || state.anchored?.has(n.node) ? " focus" : ""}`,
      title: full,
      dataset: { node: n.virtual ? `f:${n.focus}` : String(n.node) },
    }, n.rep ? "★ " : "", text, !n.virtual && typeWord(n) ? el("span", { class: "type" }, ` · ${typeWord(n)}`) : "");
    label.style.left = `${x + r + 6}px`;
    label.style.top = `${y - 8}px`;
    label.style.maxWidth = `${Math.max(40, room - r)}px`;
    box.append(label);
    const pick = () => (n.virtual ? showFocus(n) : pickNode(n));
    group.addEventListener("click", pick);
    label.addEventListener("click", pick);
  }

  function drawMore(box, hidden, width, height) {
    const more = el("button", { type: "button", class: "glabel more", id: "graph-more" },
      state.expanded ? "show fewer" : `+${hidden} more`);
    more.title = state.expanded ? `Fold the area back to ${MAX_SHOWN} nodes` : `${hidden} nodes of the area are not drawn: draw them all`;
    more.style.left = `${Math.round(COLUMNS[1][1] * width) + 14}px`;
    more.style.top = `${height - 22}px`;
    more.addEventListener("click", () => {
      state.expanded = !state.expanded;
      render(state.explained, [...state.areaNodes.values()]);
    });
    box.append(more);
  }

  function showFocus(anchor) {
    const strongest = anchor.strongest ? ` · reached most strongly: ${fullLabel(anchor.strongest)}` : "";
    $("graph-detail").textContent = `focus ${focusText(anchor.focus)}${strongest}`;
  }

  function pickNode(n) {
    if (n.fragment !== null) selectFragment(searchView(), n.fragment, null);
    else selectNode(null, n.node);
  }

  function describeNode(n) {
    const per = Object.entries(n.per_focus).map(([f, v]) => `${focusText(f)} ${score(v)}`).join(", ");
    const scored = n.score !== null ? ` · score ${score(n.score)}` : "";
    return `${n.rep ? "★ representative · " : ""}${n.kind} ${fullLabel(n)}${scored} · activation ${score(n.total)} (${per})`;
  }

  function listNodes(nodes) {
    const list = $("area-nodes");
    nodes.forEach((data, i) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = data.colour;
      swatch.style.borderColor = data.ring;
      const item = el(
        "li",
        { class: data.rep ? "node rep" : "node", dataset: { node: String(data.node), kind: data.kind } },
        el("span", { class: "n" }, `${i + 1}.`),
        swatch,
        data.rep ? "★ " : "",
        el("strong", {}, data.kind),
        " ",
        fullLabel(data),
        el("span", { class: "muted" }, ` · activation ${num(data.total)} · mostly ${data.dominant ? focusText(data.dominant) : "–"}`)
      );
      item.addEventListener("click", () => pickNode(data));
      list.append(item);
    });
  }

  function drawLegend(explained, edges, anchors, every) {
    const legend = clear($("legend"));
    const row = (colour, text, ring) => {
      const swatch = el("span", { class: ring ? "swatch ring" : "swatch" });
      if (ring) swatch.style.borderColor = colour;
      else swatch.style.background = colour;
      return el("li", {}, swatch, text);
    };
    legend.append(el("h4", {}, "Foci (ring)"));
    legend.append(el("ul", {}, anchors.map((a) => row(a.colour, focusText(a.focus), true))));
    legend.append(el("h4", {}, "Kinds (fill)"));
    legend.append(el("ul", {}, Object.entries(KIND_COLOURS).map(([k, c]) => row(c, k, false))));
    const types = [...new Set(edges.map((e) => e.type))].sort();
    legend.append(el("h4", {}, "Edges drawn"));
    legend.append(
      el("ul", {}, types.map((t) => {
        const [line, colour] = t === "focus" ? ["dotted", "#555555"] : EDGE_STYLES[t] || OTHER_EDGE;
        const sample = el("span", { class: `edge-sample ${line}` });
        sample.style.borderColor = colour;
        return el("li", {}, sample, t === "focus" ? "reached most by a focus" : t.replace(/_/g, " "));
      }))
    );
    const all = el("input", { type: "checkbox", id: "all-edges" });
    all.checked = Boolean(state.allEdges);
    all.addEventListener("change", () => {
      state.allEdges = all.checked;
      render(state.explained, [...state.areaNodes.values()]);
    });
    legend.append(el("label", { class: "toggle" }, all, ` draw every edge between drawn nodes (${every})`));
    legend.append(el("p", { class: "muted" },
      "★ double ring: the representative · bold lines: the shortest paths from each focus to it · size: activation"));
  }

  function summarise(explained) {
    const area = explained.area;
    const s = area.score;
    const rep = area.representative;
    $("area-summary").textContent =
      `Memory holds ${explained.graph.nodes} nodes; the area is ${area.nodes.length} of them ` +
      `(${area.edges.length} edges) around ${rep.kind} “${cut(rep.label, 60)}” · score ${num(s.score)} ` +
      `(coverage ${num(s.coverage, 2)}, convergence ${num(s.convergence, 2)}, mass ${num(s.mass, 2)}, ` +
      `support ${num(s.support, 2)}) · graph v${explained.graph_version}`;
  }

  function selectNode(fragment, nodeIndex) {
    $("graph").dataset.selectedFragment = fragment === null || fragment === undefined ? "" : String(fragment);
    let found = null;
    if (nodeIndex !== undefined && nodeIndex !== null) found = state.areaNodes?.get(nodeIndex) || null;
    else if (state.areaNodes) found = [...state.areaNodes.values()].find((n) => n.fragment === fragment) || null;
    state.selectedNode = found ? found.node : undefined;
    markNode(found ? found.node : null);
    $("graph-detail").textContent = found ? describeNode(found) : "";
  }

  function markNode(nodeIndex) {
    const box = $("graph");
    for (const item of document.querySelectorAll("#area-nodes li.selected, #graph .selected")) item.classList.remove("selected");
    if (nodeIndex === null || nodeIndex === undefined) return;
    const key = CSS.escape(String(nodeIndex));
    for (const item of box.querySelectorAll(`[data-node="${key}"]`)) item.classList.add("selected");
    const item = $("area-nodes").querySelector(`li[data-node="${key}"]`);
    if (item) item.classList.add("selected");
  }

  // --- receipts ---------------------------------------------------------------------------

  async function loadReceipts() {
    await guarded("receipts-error", async () => {
      const body = await api(`/memory/receipts?${query({ limit: 20 })}`);
      const rows = clear($("receipts").tBodies[0]);
      for (const r of body.receipts) {
        const open = el("button", { type: "button", class: "link" }, r.id);
        open.addEventListener("click", () => showReceipt(r.id));
        rows.append(
          el(
            "tr",
            { class: r.memory_error ? "problem" : null },
            el("td", {}, when(r.created_at)),
            el("td", {}, open),
            el("td", {}, r.model),
            el("td", { title: r.memory_error || "" }, `${r.retrieve ? "retrieved" : "skipped"}: ${r.reason}`,
              r.memory_error ? ` (memory error: ${r.memory_error})` : ""),
            el("td", { title: "found by retrieval / shown in the block / cited by number" },
              `${r.fragments} / ${r.shown ?? 0} / ${r.cited ?? 0}`),
            el("td", {}, String(r.tokens))
          )
        );
      }
      if (!body.receipts.length) {
        rows.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No receipts yet: a chat request that consults memory leaves one.")));
      }
    });
  }

  // One meaning everywhere: shown = the block has its line; cited = the block numbers it.
  // A receipt kept from before the split says `cited` where it means shown.
  function shownMark(f) {
    if (f.number !== undefined && f.number !== null) return ` · shown, cited [${f.number}]`;
    return (f.shown ?? f.cited) ? " · shown" : "";
  }

  async function showReceipt(id) {
    $("receipt-detail").hidden = false;
    $("receipt-title").textContent = `Receipt ${id}`;
    const view = state.receiptView || (state.receiptView = makeView($("receipt-context"), $("receipt-fragments"), null));
    clear(view.pre);
    clear(view.list);
    await guarded("receipt-error", async () => {
      const r = await api(`/memory/receipts/${encodeURIComponent(id)}`);
      $("receipt-title").textContent =
        `Receipt ${r.id} · ${r.model} · ${when(r.created_at)} · ${r.decision.reason} · ${r.tokens} tokens`;
      for (const f of r.area.fragments) view.list.append(fragmentItem(f, shownMark(f)));
      renderBlock(view, r.injected_text, citationMap(r.citations, r.injected_text, []));
    });
  }

  // --- entities and relations -------------------------------------------------------------

  async function loadEntities() {
    await guarded("entities-error", async () => {
      const body = await api(`/memory/entities?${query({ limit: 200 })}`);
      const rows = clear($("entities").tBodies[0]);
      for (const e of body.entities) {
        rows.append(
          el(
            "tr",
            { dataset: { entity: String(e.id) } },
            el("td", {}, el("strong", {}, e.name), e.is_speaker ? el("span", { class: "badge" }, "speaker") : ""),
            el("td", { title: e.label }, TYPE_WORDS[e.label] || "–"),
            el("td", {}, String(e.mentions)),
            el("td", {}, e.aliases.map((a) =>
              el("span", { class: "chip", title: `from ${a.source}` }, a.alias, a.lang ? ` (${a.lang})` : ""))),
            el("td", {}, e.contexts.map((c) => el("span", { class: "chip" }, `${c.label} ×${c.mentions}`)))
          )
        );
      }
      if (!body.entities.length) rows.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No entities yet.")));
    });
  }

  async function loadRelations(event) {
    if (event) event.preventDefault();
    await guarded("relations-error", async () => {
      const params = { limit: 500 };
      const entity = $("relations-entity").value.trim();
      if (entity) params.entity = entity;
      const body = await api(`/memory/relations?${query(params)}`);
      const rows = clear($("relations").tBodies[0]);
      for (const r of body.relations) {
        const kind = r.mutation.kind || "none";
        const mutation = [kind];
        if (r.mutation.other !== null) mutation.push(` of #${r.mutation.other}`);
        const source = r.source;
        rows.append(
          el(
            "tr",
            { class: `mutation-${kind} status-${r.status}`, dataset: { relation: String(r.id), mutation: kind } },
            el("td", {}, String(r.id)),
            el("td", {}, r.subject),
            el("td", {}, r.predicate),
            el("td", {}, r.object ?? "–"),
            el("td", {}, r.status),
            el("td", { title: r.mutation.reason || "" }, mutation.join(""),
              r.mutation.reason ? el("div", { class: "muted" }, r.mutation.reason) : ""),
            el("td", {}, num(r.confidence, 2)),
            el("td", { title: source.fragment_text }, `#${source.fragment_id} ${source.speaker || ""}: ${cut(source.fragment_text, 100)}`)
          )
        );
      }
      if (!body.relations.length) rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No relations.")));
    });
  }

  // --- snapshots, diff, rollback ----------------------------------------------------------

  function describeSnapshot(s) {
    const what = s.kind === "rollback" && s.target !== null ? `rollback to #${s.target}` : s.kind;
    return `snapshot #${s.id} (${what}, ${when(s.created_at)}${s.trigger ? ", trigger " + s.trigger : ""})`;
  }

  async function loadSnapshots() {
    await guarded("history-error", async () => {
      const body = await api(`/memory/snapshots?${query({ limit: 50 })}`);
      state.snapshots = body.snapshots;
      state.head = body.head;
      $("history-state").textContent =
        `head ${body.head === null ? "none" : "#" + body.head} · generation ${body.generation} · ` +
        `${body.held} held messages · ${body.journal_entries} writes since the head` +
        (body.last_rollback_at ? ` · last rollback ${when(body.last_rollback_at)}` : "");
      const rows = clear($("snapshots").tBodies[0]);
      for (const s of body.snapshots) {
        const back = el("button", { type: "button", class: "danger", dataset: { snapshot: String(s.id) } }, `Roll back to #${s.id}`);
        back.addEventListener("click", () => askRollback(s));
        const decisions = Object.entries(s.decisions).map(([k, v]) => `${k} ${v}`).join(", ");
        rows.append(
          el(
            "tr",
            { dataset: { snapshot: String(s.id) }, class: s.id === body.head ? "head" : null },
            el("td", {}, `#${s.id}`),
            el("td", {}, s.kind === "rollback" && s.target !== null ? `rollback → #${s.target}` : s.kind),
            el("td", {}, when(s.created_at)),
            el("td", {}, s.trigger || "–"),
            el("td", {}, String(s.rows_changed)),
            el("td", {}, decisions || "–"),
            el("td", {}, back)
          )
        );
      }
      if (!body.snapshots.length) {
        rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No snapshots yet: a consolidation cycle (POST /memory/dream) takes one.")));
      }
      fillDiffChoices(body.snapshots);
    });
  }

  function fillDiffChoices(snapshots) {
    const from = clear($("diff-from"));
    const to = clear($("diff-to"));
    for (const s of snapshots) {
      from.append(el("option", { value: s.id }, `#${s.id} ${s.kind}`));
      to.append(el("option", { value: s.id }, `#${s.id} ${s.kind}`));
    }
    if (snapshots.length > 1) from.value = String(snapshots[1].id);
  }

  async function showDiff(event) {
    if (event) event.preventDefault();
    const a = $("diff-from").value;
    const b = $("diff-to").value;
    const box = clear($("diff"));
    if (!a || !b) return;
    await guarded("history-error", async () => {
      const d = await api(`/memory/snapshots/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`);
      state.diffShown = [a, b];
      box.dataset.from = String(d.from_snapshot);
      box.dataset.to = String(d.to_snapshot);
      box.append(el("h3", {}, `From #${d.from_snapshot} to #${d.to_snapshot}: ${d.rows_changed} rows differ`));
      for (const name of ["entities", "relations", "contexts"]) box.append(diffSection(name, d[name]));
    });
  }

  // A changed column in words: vectors and other binary values as "changed" (never their
  // bytes), stored times as local date-times, the rest as old → new.
  const TIME_COLUMNS = /(^|_)(at|ts|seen|time|timestamp)$/;
  const COLUMN_WORDS = {
    vector_sum: "context vector", centroid: "centroid", vectors: "vectors summed",
    label: "type", first_seen: "first seen", last_seen: "last seen", created_at: "created",
    first_ts: "first said", last_ts: "last said", interpretation: "formed by",
  };

  function columnChange(column, old, now) {
    const name = COLUMN_WORDS[column] || column.replace(/_/g, " ");
    const binary = (v) => typeof v === "string" && /^<\d+ bytes>$/.test(v);
    if (binary(old) || binary(now)) return old === null ? `${name} set` : now === null ? `${name} cleared` : `${name} changed`;
    const show = (v) => {
      if (v === null || v === undefined) return "none";
      if (typeof v === "number" && TIME_COLUMNS.test(column)) return when(v);
      if (column === "label" && TYPE_WORDS[v]) return TYPE_WORDS[v];
      if (column.startsWith("is_") && (v === 0 || v === 1)) return v ? "yes" : "no";
      return typeof v === "string" ? `“${cut(v, 60)}”` : String(v);
    };
    return `${name} ${show(old)} → ${show(now)}`;
  }

  function diffSection(name, section) {
    const t = section.totals;
    const list = el("ul", { class: "diff" });
    const show = (sign, cls, rows) => {
      for (const row of rows) {
        const detail = cls === "changed"
          ? Object.entries(row.values).map(([col, v]) =>
              Array.isArray(v) ? columnChange(col, v[0], v[1]) : columnChange(col, null, v)).join("; ")
          : "";
        const sources = row.sources.map((s) => `#${s.fragment_id} ${s.speaker || ""}: ${cut(s.text, 80)}`).join(" | ");
        list.append(el("li", { class: cls, title: sources }, `${sign} ${row.label}`, detail ? el("span", { class: "muted" }, ` (${detail})`) : ""));
      }
    };
    show("+", "added", section.added);
    show("−", "removed", section.removed);
    show("~", "changed", section.changed);
    if (!list.childElementCount) list.append(el("li", { class: "muted" }, "no difference"));
    return el("section", { class: "diff-section" },
      el("h4", {}, `${name}: ${t.added ?? 0} added, ${t.removed ?? 0} removed, ${t.changed ?? 0} changed`), list);
  }

  function askRollback(snapshot) {
    state.pendingRollback = snapshot;
    $("rollback-question").textContent = `Roll memory back to ${describeSnapshot(snapshot)}?`;
    $("rollback-reform").checked = false;
    $("rollback-dialog").showModal();
  }

  function closeRollback(confirmed) {
    const snapshot = state.pendingRollback;
    const reform = $("rollback-reform").checked;
    state.pendingRollback = null;
    $("rollback-dialog").close(confirmed ? "confirm" : "cancel");
    if (confirmed && snapshot) rollback(snapshot, reform);
  }

  // After a rollback every panel shows memory as it now is: the lists reload, the diff
  // shows what the rollback changed (the head before it to the rollback's snapshot), and
  // the area and search run again.
  async function rollback(snapshot, reform) {
    const notice = $("rollback-result");
    notice.hidden = true;
    const before = state.head;
    let done = null;
    await guarded("history-error", async () => {
      done = await api("/memory/rollback", { method: "POST", body: { snapshot: snapshot.id, reform } });
      notice.textContent =
        `Memory restored to snapshot #${done.restored} (recorded as snapshot #${done.snapshot}): ` +
        `${done.rows_changed} rows changed, ${done.held} messages held` +
        (reform ? `, ${done.reformed} formed again` : "") + ".";
      notice.hidden = false;
    });
    clear($("diff"));
    await Promise.all([loadReceipts(), loadEntities(), loadRelations(null), loadSnapshots()]);
    if (done && before !== null && before !== undefined) {
      $("diff-from").value = String(before);
      $("diff-to").value = String(done.snapshot);
      await showDiff(null);
    }
    if (state.question) await search(null, { push: false });
    document.body.dataset.rollbacks = String(Number(document.body.dataset.rollbacks || 0) + 1);
  }

  // --- start ------------------------------------------------------------------------------

  function refreshAll() {
    loadTenant();
    loadReceipts();
    loadEntities();
    loadRelations(null);
    loadSnapshots();
  }

  // --- the address: /ui/?q=…&k=…&tenant=… -----------------------------------------------

  function readAddress() {
    const params = new URLSearchParams(location.search);
    return { q: params.get("q") || "", k: params.get("k") || "", tenant: params.get("tenant") || "" };
  }

  function writeAddress(push) {
    const params = new URLSearchParams();
    if (state.question) params.set("q", state.question);
    const k = $("k").value;
    if (k && k !== "8") params.set("k", k);
    const tenant = state.tenant || readAddress().tenant;
    if (tenant) params.set("tenant", tenant);
    const url = `${location.pathname}?${params}`;
    if (url === location.pathname + location.search) return;
    if (push) history.pushState(null, "", url);
    else history.replaceState(null, "", url);
  }

  function restoreAddress() {
    const wanted = readAddress();
    $("q").value = wanted.q;
    $("k").value = wanted.k || "8";
    state.wantedTenant = wanted.tenant;
    showTenant();
    if (wanted.q) search(null, { push: false });
  }

  // The tenant is the key's (the API's own rule): the address names the tenant it was
  // made for, and the page says so when the key in use acts for another one.
  async function loadTenant() {
    try {
      state.tenant = (await api("/memory/stats")).tenant;
    } catch (_) {
      state.tenant = null;
    }
    showTenant();
  }

  function showTenant() {
    const wanted = state.wantedTenant;
    $("tenant-state").textContent = state.tenant ? `tenant ${state.tenant}` : "tenant unknown (no key)";
    const box = $("tenant-warning");
    box.hidden = !(wanted && state.tenant && wanted !== state.tenant);
    box.textContent = box.hidden ? "" :
      `This address is for tenant “${wanted}”, but the key in use acts for tenant “${state.tenant}”: ` +
      `use ${wanted}'s key to see its memory.`;
  }

  // --- start ------------------------------------------------------------------------------

  // A button inside a panel's summary acts without opening or closing the panel.
  function onButton(id, work) {
    $(id).addEventListener("click", (event) => {
      event.preventDefault();
      work();
    });
  }

  function start() {
    $("key-form").addEventListener("submit", useKey);
    $("key-forget").addEventListener("click", forgetKey);
    $("search-form").addEventListener("submit", (event) => search(event));
    onButton("receipts-refresh", loadReceipts);
    onButton("entities-refresh", loadEntities);
    onButton("relations-refresh", () => loadRelations(null));
    $("relations-form").addEventListener("submit", loadRelations);
    onButton("snapshots-refresh", loadSnapshots);
    $("diff-form").addEventListener("submit", showDiff);
    $("rollback-cancel").addEventListener("click", () => closeRollback(false));
    $("rollback-confirm").addEventListener("click", () => closeRollback(true));
    $("rollback-dialog").addEventListener("cancel", () => {
      state.pendingRollback = null;
    });
    window.addEventListener("popstate", restoreAddress);
    let resizing = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => state.explained && state.explained.area && render(state.explained, [...state.areaNodes.values()]), 150);
    });
    showKeyState();
    refreshAll();
    restoreAddress();
    document.body.dataset.ready = "1";
  }

  start();
})();
