// The report's own data (`convtap report`): each request's JSON in gzip blocks, base64, one a
// line in the page's data block, read in the browser (DecompressionStream) and handed to the
// view (view.js): the first block first, drawn at once, then the rest a few at a time, the list
// drawn again now and then as it grows. The live page's data is the same, from its server.
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

  const data = document.getElementById("convtap-data");
  if (data) {
    (async () => {
      const blocks = data.textContent.split("\n").filter((b) => b.trim());
      if (blocks.length) {  // the first screen first, then the rest
        view.add(await unpack(blocks[0]));
        view.draw();
        window.__convtapFirstAt = performance.now();
      }
      // The rest read block by block, the list drawn again now and then as it grows: the page
      // stays usable meanwhile (the filters apply to what is read so far).
      let drawnAt = performance.now();
      const ahead = [];  // a few blocks read ahead, not all at once
      let next = 1;
      const more = () => { while (ahead.length < 4 && next < blocks.length) ahead.push(unpack(blocks[next++])); };
      more();
      while (ahead.length) {
        const list = await ahead.shift();
        more();
        view.add(list);
        if (performance.now() - drawnAt > 500) {
          view.draw();
          drawnAt = performance.now();
        }
      }
      performance.mark("convtap:read");
      view.ready();
    })();
  }
})();
