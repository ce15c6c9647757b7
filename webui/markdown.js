// A small Markdown renderer for model replies: fenced code blocks, inline
// code, headings, lists, quotes, bold, italics and http(s) links. All text
// is HTML-escaped first, so a reply can never inject markup or script.
// An unclosed fence (a reply still streaming) renders as code so far.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export function escapeHtml(s) { return s.replace(/[&<>"']/g, (c) => ESCAPES[c]); }

function inline(text) {
  const codes = [];
  // Inline code first, kept aside so its content is not formatted.
  let s = escapeHtml(text).replace(/`([^`\n]+)`/g, (_, c) => {
    codes.push(c);
    return '\u0000' + (codes.length - 1) + '\u0000';
  });
  s = s.replace(/\*\*([^*\n]+)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^*])\*([^*\n]+)\*/g, '$1<em>$2</em>')
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g,
      '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => '<code>' + codes[+i] + '</code>');
}

function list(lines, ordered) {
  const tag = ordered ? 'ol' : 'ul';
  const items = lines.map((l) => '<li>' + inline(l.replace(/^\s*(?:[-*+]|\d+[.)])\s+/, '')) + '</li>');
  return '<' + tag + '>' + items.join('') + '</' + tag + '>';
}

// Renders the text between code fences: blocks separated by blank lines.
function blocks(text) {
  const out = [];
  for (const block of text.split(/\n{2,}/)) {
    const lines = block.split('\n').filter((l) => l.trim() !== '');
    if (lines.length === 0) continue;
    const h = /^(#{1,6})\s+(.*)$/.exec(lines[0]);
    if (h && lines.length === 1) {
      const level = Math.min(h[1].length + 2, 6);  // h3..h6 inside a message
      out.push('<h' + level + '>' + inline(h[2]) + '</h' + level + '>');
    } else if (lines.every((l) => /^\s*[-*+]\s+/.test(l))) {
      out.push(list(lines, false));
    } else if (lines.every((l) => /^\s*\d+[.)]\s+/.test(l))) {
      out.push(list(lines, true));
    } else if (lines.every((l) => l.startsWith('>'))) {
      out.push('<blockquote>' + inline(lines.map((l) => l.replace(/^>\s?/, '')).join('\n')) + '</blockquote>');
    } else {
      out.push('<p>' + inline(lines.join('\n')) + '</p>');
    }
  }
  return out.join('');
}

export function renderMarkdown(src) {
  const parts = src.split(/^```/m);
  let html = '';
  parts.forEach((part, i) => {
    if (i % 2 === 0) {
      html += blocks(part);
      return;
    }
    const nl = part.indexOf('\n');
    const lang = nl < 0 ? '' : part.slice(0, nl).trim();
    const code = nl < 0 ? '' : part.slice(nl + 1).replace(/\n$/, '');
    const cls = /^[\w+-]+$/.test(lang) ? ' class="lang-' + lang + '"' : '';
    html += '<pre><button type="button" class="copy" aria-label="Copy code">Copy</button>' +
      '<code' + cls + '>' + escapeHtml(code) + '</code></pre>';
  });
  return html;
}
