// How the report draws what it holds (used by view.js): each item of a request (a message, a
// call with its arguments, returns and lifecycle, a return answering no call, a finding on the
// request), a request's head, a conversation's head, as DOM built from the data. Everything
// from the capture is put in as text (a text node, an attribute value set one by one), never as
// markup; each bidi control in it is shown as its escape.
(() => {
  "use strict";
  const LONG = 600;  // characters shown before the rest of a text folds away
  const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;
  const STAGES = ["called", "answered", "accepted", "continued"];
  let hidden = () => false;  // whether a finding is hidden by the filters

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
    if (hidden(f)) node.hidden = true;
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
    if (c.srv) {  // a tool the server runs in the stream: the client owes it no return
      list.append(el("li", "done", "run by the server: no return owed"));
      return list;
    }
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

  window.convtapItems = {
    shown, el, css, plural, prettyText, stepHead, convHead, LONG,
    item(it, hide) { hidden = hide; return anItem(it); },
  };
})();
