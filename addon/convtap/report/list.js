// A virtual list (used by view.js): of a long list of rows, only those in view (and a margin
// around) are drawn, inside a box as tall as all of them. Each row's height is estimated until
// it is drawn, then measured (and measured again when it changes: a fold opened); the heights'
// prefix sums are kept in a Fenwick tree, so that finding the row at a height and changing one
// height cost O(log n). A row drawn above what is read that is taller than estimated moves the
// window with it, so that what is read stays put. Past MOST pixels (browsers cap an element's
// height), the box holds 100 pages of the list, scrolled through one after another: a small
// scroll moves the list as far, a jump of the scroll bar goes where it points.
(() => {
  "use strict";
  const OVERSCAN = 800;  // pixels drawn above and below the window
  const MOST = 8e6;  // pixels the list's box is at most

  window.convtapList = (box, slice, { estimate, draw, remember }) => {
    let rows = [];
    let tops = null;
    const drawn = new Map();  // row → its element, for the rows drawn

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

    function show(list) {
      rows = list;
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
        remember(rows[i], h);
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
      for (const row of rows) remember(row, 0);
      show(rows);
    });

    // The window's top at the row's top (less `above` pixels).
    function reveal(i, above) {
      window.scrollTo(0, box.getBoundingClientRect().top + window.scrollY + tops.sum(i) - offset - above);
    }

    return { show, reveal };
  };
})();
