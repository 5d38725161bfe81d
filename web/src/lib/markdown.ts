// Markdown for agent and user text. Raw HTML in the text is shown as text, never interpreted, and links
// may only point to http(s), mailto or relative addresses (the page's CSP is a second fence).
import { Marked, type Tokens } from 'marked';

const escape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const safeHref = (href: string) => /^(https?:|mailto:|\/|#|\.)/i.test(href.trim()) || !/^[a-z][a-z0-9+.-]*:/i.test(href.trim());

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag): string {
      return escape(token.text);
    },
    link(this: { parser: { parseInline: (t: Tokens.Generic[]) => string } }, token: Tokens.Link): string {
      const text = this.parser.parseInline(token.tokens);
      if (!safeHref(token.href)) return text;
      const title = token.title ? ` title="${escape(token.title)}"` : '';
      return `<a href="${escape(token.href)}"${title} target="_blank" rel="noopener noreferrer">${text}</a>`;
    },
    image(token: Tokens.Image): string {
      return escape(`[image: ${token.text || token.href}]`);
    },
  },
});

const cache = new Map<string, string>();

/** Renders markdown to safe HTML (memoized for finished messages). */
export function renderMarkdown(text: string): string {
  const hit = cache.get(text);
  if (hit !== undefined) return hit;
  const html = marked.parse(text) as string;
  if (cache.size > 2000) cache.clear();
  cache.set(text, html);
  return html;
}
