// What tests/app/test_browser.py measures on a page, in the browser (generic: any Streamlit element,
// any plotly figure, any component drawn in the page's DOM):
// - truncated: an element that cuts what overflows it (ellipsis, hidden, a sideways scroll) has
//   more text than room (scrollWidth > clientWidth); code blocks may scroll;
// - small: a text's computed font size under minFontPx (math's sub- and superscripts may be);
// - overlaps: two lines of text whose boxes share more than 3 px both ways: HTML text nodes (one
//   box per line) and plotly's SVG <text>; a formula's own glyphs stack by design;
// - clipped: a figure's text that leaves its figure.
// Hidden text (display none, transparent, clipped to nothing, off the page) is not measured.
(minFontPx) => {
  const out = {truncated: [], small: [], overlaps: [], clipped: []};
  const visible = (el) => {
    const closed = el.closest('details:not([open])');  // a closed expander shows its summary only
    if (closed && !el.closest('summary')) return false;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return false;
      if (s.position === 'absolute' && s.clip === 'rect(0px, 0px, 0px, 0px)') return false;  // for screen readers only
    }
    return true;
  };
  // left of the page or clipped to nothing: a collapsed sidebar, a "skip to content" link
  const onScreen = (r) => r.right > 0 && r.left < innerWidth;
  const boxes = [];
    // the app's page, or a component's own document (an iframe, measured on its own)
  const root = document.querySelector('[data-testid="stApp"]') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.trim();
    const el = n.parentElement;
    if (!text.replace(/[\s\u200b]/g, '') || !el || el.closest('svg, style, script, noscript, [data-testid="stTooltipContent"], .katex-mathml')) continue;
    if (!visible(el)) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    for (const r of range.getClientRects()) if (r.width > 1 && r.height > 1 && onScreen(r)) boxes.push({r, text, el, kind: 'html'});
    const fs = parseFloat(getComputedStyle(el).fontSize);
    if (fs < minFontPx && !el.closest('.katex')) out.small.push(`${fs}px: ${text.slice(0, 40)}`);
  }
  for (const el of root.querySelectorAll('.main-svg text')) {
    const text = el.textContent.trim();
    if (!text || !visible(el)) continue;
    const st = getComputedStyle(el);
    if (/rgba\(.*,\s*0\)$/.test(st.fill) || parseFloat(st.fillOpacity) === 0) continue;  // transparent: drawn for layout only
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || r.height <= 1 || !onScreen(r)) continue;
    boxes.push({r, text, el, kind: 'svg'});
    const fs = parseFloat(getComputedStyle(el).fontSize);
    if (fs < minFontPx) out.small.push(`${fs}px (figure): ${text.slice(0, 40)}`);
    const chart = el.closest('.main-svg').getBoundingClientRect();
    // a text's box holds its line's ascent and descent: a capital letter's top is a quarter of
    // the box under the box's top, so that much may pass the edge without cutting a glyph
    const slack = r.height / 4;
    if (r.left < chart.left - 2 || r.right > chart.right + 2 || r.top < chart.top - slack || r.bottom > chart.bottom + slack)
      out.clipped.push(`figure text outside its chart: ${text.slice(0, 40)}`);
  }
  // truncated: an element that hides what overflows it (ellipsis, hidden) and has more text than room
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('svg') || !el.textContent.trim() || el.clientWidth < 2 || !onScreen(el.getBoundingClientRect())) continue;
    const s = getComputedStyle(el);
    if (s.overflowX === 'visible' && s.textOverflow !== 'ellipsis') continue;
    if (el.scrollWidth > el.clientWidth + 1 && visible(el) && !el.closest('pre'))
      out.truncated.push(`${el.scrollWidth}>${el.clientWidth} ${s.overflowX}: ${el.textContent.trim().slice(0, 40)}`);
  }
  // overlap: two lines of text whose boxes share more than 3 px both ways
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    const formula = boxes[i].el.closest('.katex');
    if (formula && formula === boxes[j].el.closest('.katex')) continue;
    if (w > 3 && h > 3 && !boxes[i].el.contains(boxes[j].el) && !boxes[j].el.contains(boxes[i].el))
      out.overlaps.push(`"${boxes[i].text.slice(0, 30)}" x "${boxes[j].text.slice(0, 30)}"`);
  }
  return out;
}
