// The report's conversations (`convtap report`, `convtap serve`): the page holds them as data,
// each request of each conversation (a step) as JSON, and draws only the rows in view: a
// conversation's head, a step's head, each item (a message, a call with its returns, a return
// answering no call, a finding on a request). The filters (severity, rule, tool, conversation,
// a text search; also read from the URL fragment: #rule=return-recipient&severity=error) run over
// the data, not over what is drawn. Everything from the capture is put in as text (textContent,
// attribute values set one by one), never as markup.
(() => {
  "use strict";
  const KEYS = ["q", "severity", "rule", "tool", "conversation"];
  const LONG = 600;  // characters shown before the rest of a text folds away
  const OVERSCAN = 800;  // pixels drawn above and below the window
  const MOST = 8e6;  // pixels the list's box is at most (browsers cap an element's height)
  const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;
  const HAS_BIDI = /[\u202a-\u202e\u2066-\u2069]/;
  const STAGES = ["called", "answered", "accepted", "continued"];
  const form = document.getElementById("filters");
  const shownCount = document.getElementById("shown");
  const box = document.getElementById("rows");
  const slice = document.getElementById("slice");
  const steps = new Map();  // JSON [conversation, step] → step
  const convs = new Map();  // conversation key → {id, steps, first}
  let order = null;  // the conversations in page order (null: to be sorted again)
  let rows = [];  // what the filters let through, in page order
  let flags = new Uint8Array(0);  // for each row: 1 the last of its conversation, 2 a later step
  let filters = {};
  let tops = null;  // prefix sums of the rows' heights (a Fenwick tree)
  const drawn = new Map();  // row → its element, for the rows drawn

  // -- text as the page shows it ------------------------------------------------------------

  // A bidi control reorders what follows it: each is shown as its escape (\u202e).
  const shown = (v) => String(v ?? "").replace(BIDI, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  const css = (v) => String(v ?? "").replace(/[^A-Za-z0-9_-]/g, "-");
  const when = (at) => (at == null ? "-" : new Date(at * 1000).toISOString().slice(0, 23).replace("T", " "));
  const clock = (at) => (at == null ? "-" : when(at).slice(11));
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  function el(tag, cls, ...children) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    for (const child of children) {
      if (child == null || child === false) continue;
      node.append(child instanceof Node ? child : shown(child));
    }
    return node;
  }

  // JSON text indented as json.dumps(value, indent=2) writes it, each line with the path of keys
  // it opens (so that a finding's field can be marked; null for a closing bracket), its numbers
  // as the capture wrote them; null for text that is not JSON.
  function indented(textIn) {
    const text = String(textIn ?? "");
    try { JSON.parse(text); } catch (e) { return null; }
    const lines = [];
    let i = 0;
    const skip = () => { while (i < text.length && " \t\r\n".includes(text[i])) i += 1; };
    const scalar = () => {
      let j = i;
      if (text[i] === '"') {
        for (j = i + 1; text[j] !== '"'; j += text[j] === "\\" ? 2 : 1);
        const raw = text.slice(i, j + 1);
        i = j + 1;
        return JSON.stringify(JSON.parse(raw));
      }
      while (j < text.length && !",:]} \t\r\n".includes(text[j])) j += 1;
      const raw = text.slice(i, j);
      i = j;
      return raw;
    };
    const walk = (pad, head, path) => {
      skip();
      const open = text[i];
      if (open !== "{" && open !== "[") { lines.push([pad + head + scalar(), path]); return; }
      const array = open === "[";
      const close = array ? "]" : "}";
      i += 1;
      skip();
      if (text[i] === close) { i += 1; lines.push([pad + head + open + close, path]); return; }
      lines.push([pad + head + open, path]);
      for (let index = 0; ; index += 1) {
        skip();
        let name = "", key = index;
        if (!array) {
          key = JSON.parse(scalar());
          name = `${JSON.stringify(key)}: `;
          skip();
          i += 1;  // the colon
        }
        walk(`${pad}  `, name, [...path, key]);
        skip();
        if (text[i] === ",") { i += 1; lines[lines.length - 1][0] += ","; continue; }
        i += 1;  // the closing bracket
        break;
      }
      lines.push([pad + close, null]);
    };
    walk("", "", []);
    return lines;
  }

  // A return's JSON indented, the line of each offending field in a <mark> naming its rules.
  function jsonBlock(textIn, marks) {
    const pre = el("pre", "json");
    const lines = indented(textIn);
    if (lines === null) { pre.textContent = shown(textIn); return pre; }
    const wanted = new Map((marks || []).map(([path, rules]) => [JSON.stringify(path), shown(rules.join(" "))]));
    let text = "";
    lines.forEach(([line, opens], n) => {
      if (n) text += "\n";
      const rules = opens && opens.length ? wanted.get(JSON.stringify(opens)) : undefined;
      if (!rules) { text += line; return; }
      if (text) pre.append(shown(text));
      text = "";
      const mark = el("mark", null, line);
      mark.dataset.rules = rules;
      mark.title = rules;
      pre.append(mark);
    });
    if (text) pre.append(shown(text));
    return pre;
  }

  const prettyText = (textIn) => {
    const lines = indented(textIn);
    return lines === null ? String(textIn ?? "") : lines.map(([l]) => l).join("\n");
  };

  // -- the items ----------------------------------------------------------------------------

  function folded(value, summaryText, body) {
    const details = el("details", "long");
    details.append(el("summary", null, ...summaryText), body);
    return details;
  }

  function longText(value) {
    const t = String(value ?? "");
    if (!t) return null;
    if (t.length > LONG) {
      return folded(t, [el("span", "preview", t.slice(0, 240)), "… ", el("em", null, `${t.length} characters`)],
        el("div", "text", t));
    }
    return el("div", "text", t);
  }

  function code(value) {
    const t = String(value ?? "");
    if (t.length > LONG) return folded(t, [el("em", null, `${t.length} characters`)], el("pre", null, t));
    return el("pre", null, t);
  }

  function finding(f) {
    const node = el("div", `finding sev-${css(f.sev)}`);
    node.dataset.rule = shown(f.rule);
    node.dataset.severity = shown(f.sev);
    const rule = el("a", "rule", f.rule);
    rule.href = `#rule-${encodeURIComponent(shown(f.rule))}`;
    const doc = document.getElementById(`rule-${f.rule}`);
    rule.title = doc ? doc.dataset.summary || "" : "";
    node.append(el("span", `sev ${css(f.sev)}`, f.sev), " ", rule, " ", el("span", "what", f.msg),
      el("div", "evidence", el("span", null, "expected"), " ", el("code", null, f.exp), " ",
        el("span", null, "actual"), " ", el("code", null, f.act)));
    if (filters.byFinding && !findingOk(f)) node.hidden = true;
    return node;
  }

  function findings(list) {
    return list && list.length ? el("div", "findings", ...list.map(finding)) : null;
  }

  function aReturn(r) {
    const json = r.json ?? "";
    const body = json.length > LONG && !(r.f && r.f.length)
      ? folded(json, [el("em", null, `${json.length} characters of JSON`)], jsonBlock(json, r.marks))
      : jsonBlock(json, r.marks);
    return el("div", "ret",
      el("h5", null, "return ", el("code", null, r.mid || r.id), " ",
        el("span", "dim", `${when(r.at)} · request `, el("code", null, r.flow || "-"))),
      body, findings(r.f));
  }

  function lifecycle(c) {
    const list = el("ol", "life");
    c.life.forEach(([done, at], n) => {
      const li = el("li", done ? "done" : "no", `${STAGES[n]} `);
      if (!done) li.append("no");
      else if (at == null) li.append("yes");
      else {
        li.append(clock(at));
        if (n > 0 && c.at != null) li.append(" ", el("small", null, `+${(at - c.at).toFixed(1)} s`));
      }
      list.append(li);
    });
    return list;
  }

  function aCall(c) {
    const flagged = (c.f && c.f.length) || c.r.some((r) => r.f && r.f.length);
    const node = el("div", `item call${flagged ? " flagged" : ""}`);
    node.id = `call-${c.id}`;
    node.dataset.tool = shown(c.tool);
    const dim = [c.proto, c.kind ? ` · ${c.kind}` : "",
      c.msg ? ` · ${c.msg[0] || "no channel"} · ${c.msg[1] || "no status"}` : ""].join("");
    node.append(el("div", "head", el("span", "tag", "call"), " ", el("b", null, c.to || c.tool),
      c.proto === "responses" && c.name ? " " : null, c.proto === "responses" && c.name ? el("b", null, c.name) : null,
      " ", el("code", "id", c.id), c.item ? " " : null, c.item ? el("span", "dim", "item") : null,
      c.item ? " " : null, c.item ? el("code", null, c.item) : null, " ", el("span", "dim", dim)));
    node.append(lifecycle(c));
    const returns = c.r.length ? c.r.map(aReturn)
      : [el("h5", null, "return"), el("p", "none", "no return recorded")];
    node.append(el("div", "pair", el("div", null, el("h5", null, "arguments"),
      code(c.json ? prettyText(c.args) : c.args)), el("div", null, ...returns)));
    const loose = findings(c.f);
    if (loose) node.append(loose);
    return node;
  }

  function aMessage(m) {
    const node = el("div", `item msg role-${css(m.role || "unknown")}`);
    const dim = `${m.ch || ""}${m.ch ? " · " : ""}${m.st || ""}${m.ct && m.ct !== "text" ? ` · ${m.ct}` : ""} · ${clock(m.at)} · `;
    node.append(el("div", "head", el("span", "role", m.role || "?", m.name ? ` (${m.name})` : null),
      m.to && m.to !== "all" ? ` → ${shown(m.to)}` : null, " ", el("span", "dim", dim, el("code", null, m.id))));
    const text = longText(m.text);
    if (text) node.append(text);
    return node;
  }

  function anOrphan(r) {
    const node = el("div", `item call orphan${r.f && r.f.length ? " flagged" : ""}`);
    node.dataset.tool = shown(r.tool);
    node.append(el("div", "head", el("span", "tag", "return"), " ", el("b", null, r.tool || "?"), " ",
      el("span", "dim", "answering no recorded call", r.bcid ? " (its call_id: " : null,
        r.bcid ? el("code", null, r.bcid) : null, r.bcid ? ")" : null, ` · ${shown(r.proto)}`)),
    aReturn(r));
    return node;
  }

  function anItem(it) {
    if (it.t === "m") return aMessage(it);
    if (it.t === "c") return aCall(it);
    if (it.t === "r") return anOrphan(it);
    return el("div", "item loose", el("span", "tag", "request"), " ", el("span", "dim", "on the request itself"), finding(it));
  }

  function stepHead(s) {
    const h = s.h;
    const kind = { turn: "turn", responses: "Responses request" }[s.kind] || s.kind;
    const head = el("header", "step-head", el("span", "tag", kind), " ", el("code", null, s.s || "(no request)"));
    if (h) {
      head.append(" ", el("time", null, when(h.started)));
      if (h.model) head.append(" ", el("span", null, h.model));
      if (h.client) head.append(" ", el("span", "dim", h.client));
      if (h.status != null) head.append(" ", el("span", null, `${shown(h.status)} ${shown(h.outcome || "")}`));
      if (h.events != null) head.append(" ", el("span", "dim", `${h.events} events${h.legs > 1 ? `, ${h.legs} legs` : ""}`));
      if (h.ws) head.append(" ", el("span", "dim", `WebSocket ${shown(h.ws)}`));
      if (h.truncated) head.append(" ", el("span", "badge warn", "truncated"));
      if (h.errors) {
        const a = el("a", "badge warn", `${h.errors} decode error${h.errors !== 1 ? "s" : ""}`);
        a.href = "#decode-errors";
        head.append(" ", a);
      }
      if (h.failure) {
        const b = el("span", "badge err", "our own failure");
        b.title = shown(h.failure);
        head.append(" ", b);
      }
    }
    return head;
  }

  function convHead(c) {
    const head = el("h3", "conv-head", el("span", "tag", "conversation"), " ",
      el("code", null, c.id || "(no conversation id)"), " ",
      el("span", "dim", `${plural(c.calls, "call")} · ${plural(c.findings, "finding")}`));
    if (c.id) {
      const only = el("a", "only", "only this conversation");
      only.href = `#conversation=${encodeURIComponent(shown(c.id))}`;
      head.append(" ", only);
    }
    return head;
  }

  function draw(row, i) {
    let node;
    if (row.kind === "conv") {
      node = el("div", "row conv-row", convHead(row.conv));
      node.dataset.conv = shown(row.conv.id);
    } else if (row.kind === "step") {
      node = el("div", "row", el("article", `step${flags[i] & 2 ? " later" : ""}`, stepHead(row.step),
        row.step.x ? el("pre", "exchange", row.step.x.join("\n")) : null));
    } else {
      node = el("div", "row", el("div", "rail", anItem(row.item)));
    }
    if (flags[i] & 1) node.classList.add("last");
    node.dataset.key = row.key;  // what it draws: a conversation, a step, an item of a step
    node.row = row;
    const open = owner(row)._open;
    if (open) [...node.getElementsByTagName("details")].forEach((d, n) => { d.open = Boolean(open[n]); });
    return node;
  }

  // -- the data -----------------------------------------------------------------------------

  const keyOf = (s) => JSON.stringify([s.c, s.s]);

  function counts(conv) {
    let calls = 0, found = 0;
    for (const s of conv.steps) {
      for (const it of s.i || []) {
        if (it.t === "c") {
          calls += 1;
          found += (it.f || []).length + it.r.reduce((n, r) => n + (r.f || []).length, 0);
        } else if (it.t === "r") found += (it.f || []).length;
        else if (it.t === "f") found += 1;
      }
    }
    conv.calls = calls;
    conv.findings = found;
  }

  function detach(key) {
    const old = steps.get(key);
    if (!old) return;
    steps.delete(key);
    const conv = convs.get(old.c);
    conv.steps = conv.steps.filter((s) => s !== old);
    if (!conv.steps.length) convs.delete(old.c);
    conv.dirty = true;
    order = null;
    entries = null;
  }

  // Steps in (new ones, or newer versions of ones held: `v` counts the server's readings).
  function add(list) {
    for (const s of list) {
      const key = keyOf(s);
      const old = steps.get(key);
      if (old && (old.v || 0) > (s.v || 0)) continue;
      if (gone.has(key) && gone.get(key) >= (s.v || 0)) continue;
      s.i = s.i || [];
      if (old) {  // a step grows: its items' heights and folds carry over
        old.i.forEach((it, n) => {
          const now = s.i[n];
          if (now && now.t === it.t && now.id === it.id) { now._h = it._h; now._open = it._open; }
        });
      }
      detach(key);
      steps.set(key, s);
      let conv = convs.get(s.c);
      if (!conv) convs.set(s.c, (conv = { id: s.c, steps: [] }));
      conv.steps.push(s);
      conv.dirty = true;
      order = null;
      entries = null;
    }
  }

  const gone = new Map();  // steps the server said are gone, with its reading then
  function remove(list) {
    for (const [key, v] of list) {
      const old = steps.get(key);
      if (!old || (old.v || 0) <= v) detach(key);
      gone.set(key, v);
    }
  }

  function sorted() {
    if (order) return order;
    for (const conv of convs.values()) {
      if (!conv.dirty) continue;
      conv.steps.sort((a, b) => a.at - b.at || (a.s < b.s ? -1 : a.s > b.s ? 1 : 0));
      conv.first = conv.steps.reduce((least, s) => Math.min(least, s.first ?? s.at), Infinity);
      counts(conv);
      conv.dirty = false;
    }
    order = [...convs.values()].sort((a, b) => a.first - b.first || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return order;
  }

  // -- the filters --------------------------------------------------------------------------

  function findingOk(f) {
    return (!filters.rule || f.rule === filters.rule) && (!filters.severity || f.sev === filters.severity);
  }

  function itemFindings(it) {
    if (it._f) return it._f;
    if (it.t === "c") it._f = [...(it.f || []), ...it.r.flatMap((r) => r.f || [])];
    else if (it.t === "r") it._f = it.f || [];
    else it._f = it.t === "f" ? [it] : [];
    return it._f;
  }

  // What a text search reads in an item: its ids, names and texts, its returns' JSON and its
  // findings, lowercased once (the first search, or an idle moment after the page opened).
  function searchText(it) {
    if (it._q !== undefined) return it._q;
    const parts = [it.id, it.role, it.name, it.to, it.ch, it.st, it.ct, it.text, it.tool, it.proto,
      it.kind, it.item, it.args, it.mid, it.flow, it.bcid, it.json, it.rule, it.sev, it.msg, it.exp, it.act];
    for (const r of it.r || []) parts.push(r.id, r.mid, r.flow, r.json);
    for (const f of itemFindings(it)) if (f !== it) parts.push(f.rule, f.sev, f.msg, f.exp, f.act);
    const text = parts.filter((p) => p != null).join("\n");
    it._q = (HAS_BIDI.test(text) ? shown(text) : text).toLowerCase();
    return it._q;
  }

  function index(deadline) {  // the search text of every item, a slice at a time when idle
    for (const s of steps.values()) {
      if (s._q) continue;
      for (const it of s.i) searchText(it);
      s._q = true;
      if (deadline.timeRemaining() < 2) { requestIdleCallback(index); return; }
    }
  }

  // Everything in page order, one entry a row: a conversation's head, a step's head, an item.
  // Made again when the data changes; a filter only picks entries from it.
  let entries = null;
  let itemCount = 0;
  function flat() {
    if (entries) return entries;
    entries = [];
    itemCount = 0;
    for (const conv of sorted()) {
      entries.push({ kind: "conv", conv, key: `c${JSON.stringify(conv.id)}` });
      for (const s of conv.steps) {
        const key = keyOf(s);
        entries.push({ kind: "step", step: s, key: `s${key}` });
        s.i.forEach((item, n) => entries.push({ kind: "item", step: s, item, key: `i${key}${n}` }));
        itemCount += s.i.length;
      }
    }
    return entries;
  }

  function apply(f) {
    const started = performance.now();
    filters = { ...f, byFinding: Boolean(f.severity || f.rule) };
    const q = (f.q || "").trim().toLowerCase();
    const narrowing = filters.byFinding || Boolean(f.tool || q);
    const out = [];
    const marks = [];  // 1: a conversation's last row; 2: a step after the first shown
    let items = 0, calls = 0, found = 0;
    let convOk = false, convAt = -1, stepAt = -1, anyStep = false, anyItem = false;
    const endStep = () => {
      if (stepAt < 0) return;
      if (!anyItem && narrowing) { out.length = stepAt; marks.length = stepAt; } else anyStep = true;
      stepAt = -1;
    };
    const endConv = () => {
      endStep();
      if (convAt < 0) return;
      if (!anyStep && narrowing) { out.length = convAt; marks.length = convAt; } else marks[out.length - 1] |= 1;
      convAt = -1;
    };
    for (const e of flat()) {
      if (e.kind === "conv") {
        endConv();
        const id = e.conv._shown ?? (e.conv._shown = shown(e.conv.id));
        convOk = !f.conversation || id.includes(f.conversation);
        if (convOk) { convAt = out.length; anyStep = false; out.push(e); marks.push(0); }
      } else if (!convOk) {
        continue;
      } else if (e.kind === "step") {
        endStep();
        stepAt = out.length;
        anyItem = false;
        out.push(e);
        marks.push(anyStep ? 2 : 0);
      } else {
        const it = e.item;
        let matched = 0;
        for (const fe of itemFindings(it)) if (findingOk(fe)) matched += 1;
        if (filters.byFinding && !matched) continue;
        if (f.tool && (it._tool ?? (it._tool = shown(it.tool || ""))) !== f.tool) continue;
        if (q && !searchText(it).includes(q)) continue;
        out.push(e);
        marks.push(0);
        anyItem = true;
        items += 1;
        calls += it.t === "c" || it.t === "r" ? 1 : 0;
        found += matched;
      }
    }
    endConv();
    rows = out;
    flags = Uint8Array.from(marks);
    const filtered = KEYS.some((k) => f[k]);
    shownCount.textContent = filtered
      ? `showing ${items} of ${itemCount} items: ${calls} ${calls === 1 ? "call or return" : "calls and returns"}, ${plural(found, "finding")}`
      : `${itemCount} items`;
    document.getElementById("nothing").hidden = convs.size > 0;
    layout();
    return performance.now() - started;
  }

  // -- the virtual list -----------------------------------------------------------------------

  // Where a row's measured height is kept: on what it draws, so that it outlives a filter.
  const owner = (row) => (row.kind === "conv" ? row.conv : row.kind === "step" ? row.step : row.item);

  const estimate = (row) => {
    const known = owner(row)._h;
    if (known) return known;
    if (row.kind === "conv") return 56;
    if (row.kind === "step") return 40 + 18 * (row.step.x ? row.step.x.length : 0);
    const it = row.item;
    if (it.t === "m") return 44 + 20 * Math.ceil(Math.min((it.text || "").length, LONG) / 120);
    if (it.t === "c") return 150 + 18 * Math.min(30, Math.ceil(((it.r[0] && it.r[0].json) || "").length / 25));
    return 120;
  };

  function Tree(heights) {  // prefix sums of the rows' heights, each changed in O(log n)
    const n = heights.length;
    const h = heights;
    const t = new Float64Array(n + 1);
    for (let i = 1; i <= n; i += 1) {  // built in O(n)
      t[i] += h[i - 1];
      const up = i + (i & -i);
      if (up <= n) t[up] += t[i];
    }
    return {
      n, h,
      set(i, v) { const d = v - h[i]; h[i] = v; for (let j = i + 1; j <= n; j += j & -j) t[j] += d; },
      sum(i) { let s = 0; for (let j = i; j > 0; j -= j & -j) s += t[j]; return s; },
      find(y) {  // the row at height y
        let i = 0, step = 1;
        while (step * 2 <= n) step *= 2;
        for (; step; step >>= 1) if (i + step <= n && t[i + step] <= y) { i += step; y -= t[i]; }
        return Math.min(i, n - 1);
      },
    };
  }

  let page = 0, offset = 0, lastTop = 0;  // past MOST pixels: a page of the list, and its shift

  function layout() {
    const heights = new Float64Array(rows.length);
    for (let i = 0; i < rows.length; i += 1) heights[i] = estimate(rows[i]);
    tops = Tree(heights);
    for (const node of drawn.values()) { node.remove(); watcher.unobserve(node); }
    drawn.clear();
    render();  // at once: what the filters let through is on screen when they return
  }

  let pending = 0;
  function schedule() {
    if (!pending) pending = requestAnimationFrame(() => { pending = 0; render(); });
  }

  function geometry() {
    const total = rows.length ? tops.sum(rows.length) : 0;
    const height = Math.min(total, MOST);
    const pageHeight = height / 100;
    const pages = total > MOST ? Math.ceil(total / pageHeight) : 1;
    const jump = pages > 1 ? (total - height) / (pages - 1) : 0;
    return { total, height, pageHeight, pages, jump };
  }

  function render() {
    const g = geometry();
    box.style.height = `${g.height}px`;
    const view = window.innerHeight;
    const real = Math.max(0, -box.getBoundingClientRect().top);
    if (g.pages > 1) {
      if (Math.abs(real - lastTop) > view) {  // the scroll bar dragged: where it points
        page = Math.min(g.pages - 1, Math.floor((real * ((g.total - view) / (g.height - view))) / g.pageHeight));
        offset = Math.round(page * g.jump);
      } else {  // scrolled by a little: as far, and the page shifted under it when it changes
        const virtual = real + offset;
        const wanted = Math.min(g.pages - 1, Math.floor(virtual / g.pageHeight));
        if (wanted !== page) {
          page = wanted;
          offset = Math.round(page * g.jump);
          lastTop = virtual - offset;
          window.scrollTo(0, window.scrollY + (lastTop - real));
          schedule();
          return;
        }
      }
    }
    lastTop = real;
    if (!rows.length) { for (const node of drawn.values()) node.remove(); drawn.clear(); return; }
    const top = real + offset;
    const first = tops.find(Math.max(0, top - OVERSCAN));
    const wanted = [];
    for (let i = first, y = tops.sum(first); i < rows.length && y < top + view + OVERSCAN; i += 1) {
      wanted.push(i);
      y += tops.h[i];
    }
    const keep = new Set(wanted.map((i) => rows[i]));
    for (const [row, node] of drawn) if (!keep.has(row)) { node.remove(); drawn.delete(row); watcher.unobserve(node); }
    let before = null;
    for (let n = wanted.length - 1; n >= 0; n -= 1) {
      const row = rows[wanted[n]];
      let node = drawn.get(row);
      if (!node) {
        node = draw(row, wanted[n]);
        node.rowIndex = wanted[n];
        drawn.set(row, node);
        watcher.observe(node);
      }
      node.rowIndex = wanted[n];
      if (node.nextSibling !== before || node.parentNode !== slice) slice.insertBefore(node, before);
      before = node;
    }
    slice.style.top = `${tops.sum(first) - offset}px`;
    measure([...drawn.values()]);
  }

  // Rows drawn are measured: a height that differs from its estimate moves the rows after it,
  // and the window with it when the row is above what is read, so that what is read stays put.
  function measure(nodes) {
    const viewTop = Math.max(0, -box.getBoundingClientRect().top) + offset;
    let shift = 0, changed = false;
    for (const node of nodes) {
      const i = node.rowIndex;
      if (i === undefined || rows[i] === undefined || drawn.get(rows[i]) !== node) continue;
      const h = node.offsetHeight;
      if (!h || Math.abs(h - tops.h[i]) < 0.5) continue;
      if (tops.sum(i) + tops.h[i] <= viewTop) shift += h - tops.h[i];
      tops.set(i, h);
      owner(rows[i])._h = h;
      changed = true;
    }
    if (!changed) return;
    const first = Math.min(...nodes.map((n) => n.rowIndex ?? Infinity));
    if (Number.isFinite(first)) slice.style.top = `${tops.sum(first) - offset}px`;
    box.style.height = `${geometry().height}px`;
    if (shift) { window.scrollBy(0, shift); lastTop += shift; }
    schedule();
  }

  const watcher = new ResizeObserver((entries) => measure(entries.map((e) => e.target)));
  window.addEventListener("scroll", schedule, { passive: true });
  window.addEventListener("resize", () => {
    for (const row of rows) owner(row)._h = 0;
    layout();
  });
  // What the reader unfolded stays unfolded when its row is drawn again.
  slice.addEventListener("toggle", (ev) => {
    const node = ev.target.closest(".row");
    if (node && node.row) owner(node.row)._open = [...node.getElementsByTagName("details")].map((d) => d.open);
  }, true);

  // -- the form and the URL fragment ----------------------------------------------------------

  function read() {
    const f = {};
    for (const k of KEYS) f[k] = form.elements[k].value;
    return f;
  }

  function write(f) {
    for (const k of KEYS) {
      const input = form.elements[k];
      const value = f[k] || "";
      if (input.tagName === "SELECT" && value && ![...input.options].some((o) => o.value === value)) {
        input.add(new Option(value, value));
      }
      input.value = value;
    }
  }

  function fromHash() {
    const raw = location.hash.slice(1);
    if (!raw.includes("=")) return null;  // an anchor (#rule-return-recipient), not filters
    const params = new URLSearchParams(raw);
    const f = {};
    for (const k of KEYS) f[k] = params.get(k) || "";
    f.conversation = f.conversation || params.get("conv") || "";
    return f;
  }

  function toHash(f) {
    const params = new URLSearchParams();
    for (const k of KEYS) if (f[k]) params.set(k, f[k]);
    const hash = params.toString();
    try {
      history.replaceState(null, "", hash ? `#${hash}` : location.pathname + location.search);
    } catch (e) { /* some browsers refuse it on file:// URLs: the filters still apply */ }
  }

  // The tools the data calls, offered in the tool filter (the page's own list comes first).
  function offerTools() {
    const select = form.elements.tool;
    const have = new Set([...select.options].map((o) => o.value));
    const found = new Set();
    for (const s of steps.values()) for (const it of s.i) if (it.tool && (it.t === "c" || (it.t === "r" && it.proto !== "responses"))) found.add(shown(it.tool));
    for (const tool of [...found].sort()) if (!have.has(tool)) select.add(new Option(tool, tool));
  }

  // A call named in the fragment (#call-ID): scrolled to once its row is known.
  function toCall() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id.startsWith("call-")) return;
    const i = rows.findIndex((r) => r.kind === "item" && r.item.t === "c" && `call-${r.item.id}` === id);
    if (i >= 0) window.scrollTo(0, box.getBoundingClientRect().top + window.scrollY + tops.sum(i) - offset - 60);
  }

  let timer = 0;
  const changed = () => { const f = read(); apply(f); toHash(f); };
  form.addEventListener("input", (ev) => {
    clearTimeout(timer);
    timer = setTimeout(changed, ev.target.name === "q" ? 150 : 0);
  });
  form.addEventListener("submit", (ev) => ev.preventDefault());
  form.addEventListener("reset", () => setTimeout(changed));
  window.addEventListener("hashchange", () => {
    const f = fromHash();
    if (f) { write(f); apply(f); } else toCall();
  });

  // What the live page's script calls: steps in and out, then drawn again with the filters kept.
  window.convtap = {
    add, remove,
    pretty: prettyText,  // JSON text as the page indents it
    refresh() { offerTools(); apply(read()); },
    clear() { steps.clear(); convs.clear(); gone.clear(); order = null; entries = null; },
    ready() {
      document.getElementById("loading").hidden = true;
      offerTools();
      const initial = fromHash();
      if (initial) write(initial);
      apply(initial || read());
      toCall();
      window.__convtapReadyAt = performance.now();
      window.__convtapReady = true;
      if (window.requestIdleCallback) requestIdleCallback(index);
    },
  };
  window.convtapFilter = (f) => {
    const all = Object.fromEntries(KEYS.map((k) => [k, (f && f[k]) || ""]));
    write(all);
    return apply(all);
  };

  // -- the report's own data ------------------------------------------------------------------

  function bytes(base64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64);
    const binary = atob(base64);
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i);
    return out;
  }

  async function unpack(base64) {
    const stream = new Blob([bytes(base64)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  const data = document.getElementById("convtap-data");
  if (data) {
    (async () => {
      const blocks = data.textContent.split("\n").filter((b) => b.trim());
      if (blocks.length) {  // the first screen first, then the rest
        add(await unpack(blocks[0]));
        apply(fromHash() || read());
        window.__convtapFirstAt = performance.now();
      }
      const lists = await Promise.all(blocks.slice(1).map(unpack));
      performance.mark("convtap:unpacked");
      for (const list of lists) add(list);
      performance.mark("convtap:added");
      window.convtap.ready();
    })();
  }
})();
