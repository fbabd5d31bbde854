// The report's own data (`convtap report`): each request's JSON in gzip blocks, base64, one a
// line in the page's data block, read in the browser (DecompressionStream) and handed to the
// view (view.js): the first block first, drawn at once, then the rest a few at a time, the list
// drawn again now and then as it grows. The live page (`convtap serve`) holds no data: it
// fetches the same lines from its server (the element's `data-src`) and reads each as it comes;
// `window.convtapReading` is then the server's reading they are of (live.js asks for what
// changed since it).
(() => {
  "use strict";
  const view = window.convtap;

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

  // The lines of a response as they arrive, each whole.
  async function* lines(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const parts = (rest + value).split("\n");
      rest = parts.pop();
      for (const line of parts) if (line.trim()) yield line;
    }
    if (rest.trim()) yield rest;
  }

  // The blocks read in order: the first drawn at once, the rest a few read ahead, the list
  // drawn again now and then as it grows: the page stays usable meanwhile (the filters apply
  // to what is read so far).
  async function read(blocks) {
    const source = blocks[Symbol.asyncIterator] ? blocks[Symbol.asyncIterator]() : blocks[Symbol.iterator]();
    const first = await source.next();
    if (!first.done) {
      view.add(await unpack(first.value));
      view.draw();
      window.__convtapFirstAt = performance.now();
    }
    let drawnAt = performance.now();
    const take = (list) => {
      view.add(list);
      if (performance.now() - drawnAt > 500) {
        view.draw();
        drawnAt = performance.now();
      }
    };
    const ahead = [];  // a few blocks read ahead, not all at once
    for (let next = first.done ? first : await source.next(); !next.done; next = await source.next()) {
      ahead.push(unpack(next.value));
      if (ahead.length >= 4) take(await ahead.shift());
    }
    while (ahead.length) take(await ahead.shift());
    performance.mark("convtap:read");
    view.ready();
  }

  // The live page's data from its server: the reading it is of known from the answer's head.
  function fetched(url) {
    let reading;
    window.convtapReading = new Promise((resolve) => { reading = resolve; });
    (async () => {
      const answer = await fetch(url, { cache: "no-store" });
      if (!answer.ok) throw new Error(`${url}: ${answer.status}`);
      reading(answer.headers.get("X-Convtap-Reading") || "-1");
      await read(lines(answer));
    })().catch(() => {  // the server gone or refusing: a reload asks again
      document.getElementById("loading").textContent = "The capture's data could not be read: reload the page.";
    });
  }

  window.convtapLines = lines;  // (what the tests feed split at every byte)

  const data = document.getElementById("convtap-data");
  if (data && data.dataset.src) fetched(data.dataset.src);
  else if (data) read(data.textContent.split("\n").filter((b) => b.trim()));
})();
