// Syntax highlighting for the Files tab's viewer (issue 18) and the Changes tab's diffs:
// highlight.js's core with the
// languages a worktree mostly holds, loaded as its own chunk when a file is first opened
// (`import('./highlight')`), so the board never pays for it. highlight.js escapes the text it
// is given; its output is HTML of `<span class="hljs-…">` only.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import kotlin from 'highlight.js/lib/languages/kotlin';
import makefile from 'highlight.js/lib/languages/makefile';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import ruby from 'highlight.js/lib/languages/ruby';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import swift from 'highlight.js/lib/languages/swift';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = {
  bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, kotlin, makefile, markdown, python, ruby,
  rust, sql, swift, typescript, xml, yaml,
};
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** Language by file extension (lower case), or by whole file name. */
const BY_EXTENSION: Record<string, keyof typeof LANGUAGES> = {
  sh: 'bash', bash: 'bash', zsh: 'bash', c: 'c', h: 'c', cc: 'cpp', cpp: 'cpp', cxx: 'cpp', hpp: 'cpp', css: 'css',
  scss: 'css', diff: 'diff', patch: 'diff', go: 'go', ini: 'ini', toml: 'ini', cfg: 'ini', java: 'java',
  js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript', json: 'json', jsonc: 'json',
  kt: 'kotlin', kts: 'kotlin', md: 'markdown', markdown: 'markdown', py: 'python', rb: 'ruby', rs: 'rust',
  sql: 'sql', swift: 'swift', ts: 'typescript', tsx: 'typescript', mts: 'typescript', html: 'xml', htm: 'xml',
  xml: 'xml', svg: 'xml', yml: 'yaml', yaml: 'yaml',
};
const BY_NAME: Record<string, keyof typeof LANGUAGES> = {
  dockerfile: 'dockerfile', makefile: 'makefile', 'cargo.lock': 'ini', '.bashrc': 'bash', '.profile': 'bash',
};

/** Files past this size are shown plain: highlighting them would stall the page. */
const MAX_HIGHLIGHT_BYTES = 256 * 1024;

/** The language highlight.js uses for `path`, or null for plain text. */
export function languageOf(path: string): string | null {
  const name = (path.split('/').pop() ?? path).toLowerCase();
  const byName = BY_NAME[name];
  if (byName) return byName;
  const dot = name.lastIndexOf('.');
  return dot > 0 ? (BY_EXTENSION[name.slice(dot + 1)] ?? null) : null;
}

/** `content` as highlighted HTML (escaped by highlight.js), or null to show it plain. */
export function highlight(path: string, content: string): { html: string; language: string } | null {
  const language = languageOf(path);
  if (!language || content.length > MAX_HIGHLIGHT_BYTES) return null;
  return { html: hljs.highlight(content, { language, ignoreIllegals: true }).value, language };
}

/** Each of a diff's lines highlighted on its own (a construct spanning lines, such as a block
 * comment, is not seen whole), or null to show them plain. */
export function highlightLines(path: string, lines: string[]): string[] | null {
  const language = languageOf(path);
  const size = lines.reduce((n, l) => n + l.length, 0);
  if (!language || size > MAX_HIGHLIGHT_BYTES) return null;
  return lines.map((l) => hljs.highlight(l, { language, ignoreIllegals: true }).value);
}

