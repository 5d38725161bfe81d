// Versions of the agents Kandev installs (issue 51), read for the UI (no React): a semver order
// (the server lists exact versions only: `1.2.3`, `1.2.3-beta.1`, `1.2.3+build`), the version
// a profile can be updated to, and the words of a hint with its `commands` marked.
import type { ExecutorDto } from '../api/types';

/** A parsed exact version, or null for anything else (a range, a tag, junk). */
function parse(version: string): { core: [number, number, number]; pre: string[] } | null {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(version.trim());
  if (!m) return null;
  return { core: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] ? m[4].split('.') : [] };
}

/** Semver order of two exact versions (build metadata ignored): negative when `a` is older.
 * Something that is not an exact version sorts before every version. */
export function compareVersions(a: string, b: string): number {
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return (x ? 1 : 0) - (y ? 1 : 0);
  const core = x.core.map((n, i) => n - y.core[i]!).find((d) => d !== 0);
  if (core !== undefined) return core;
  // A pre-release comes before its release (1.0.0-rc.1 < 1.0.0).
  if (!x.pre.length || !y.pre.length) return (x.pre.length ? 0 : 1) - (y.pre.length ? 0 : 1);
  for (let i = 0; i < Math.max(x.pre.length, y.pre.length); i++) {
    const p = x.pre[i];
    const q = y.pre[i];
    if (p === undefined || q === undefined) return p === undefined ? -1 : 1;
    if (p === q) continue;
    const pn = /^\d+$/.test(p);
    const qn = /^\d+$/.test(q);
    if (pn && qn) return Number(p) - Number(q);
    if (pn !== qn) return pn ? -1 : 1; // numbers before words
    return p < q ? -1 : 1;
  }
  return 0;
}

/** Whether `version` is a pre-release (`1.2.0-beta.1`). */
export function isPrerelease(version: string): boolean {
  return (parse(version)?.pre.length ?? 0) > 0;
}

/**
 * The version a profile that runs `current` can be updated to: the newest of the versions
 * installed and offered by the registry that is newer than `current`, or null (none newer, or
 * the profile runs the command on PATH, which Kandev does not update). A pre-release is offered
 * only to a profile that runs a pre-release already.
 */
export function updateTarget(current: string | null, installed: string[], available: string[]): string | null {
  if (!current || !parse(current)) return null;
  const prerelease = isPrerelease(current);
  let best: string | null = null;
  for (const v of [...installed, ...available]) {
    if (!parse(v) || (isPrerelease(v) && !prerelease)) continue;
    if (compareVersions(v, current) > 0 && (best === null || compareVersions(v, best) > 0)) best = v;
  }
  return best;
}

/** The version the install picker starts on: the registry's `latest` unless it is installed,
 * else the newest offered version not installed; '' when every offered one is installed. */
export function firstToInstall(available: string[], latest: string | null, installed: string[]): string {
  const missing = (v: string) => !installed.includes(v);
  if (latest && available.includes(latest) && missing(latest)) return latest;
  return available.find(missing) ?? '';
}

/** A hint's parts: plain text, and `commands` (between backticks) to show as code. */
export function codeSpans(text: string): { text: string; code: boolean }[] {
  const parts = text.split('`');
  // An odd backtick out leaves the text after it plain.
  const closed = parts.length % 2 === 1 ? parts.length : parts.length - 1;
  const spans = parts.slice(0, closed).map((t, i) => ({ text: t, code: i % 2 === 1 }));
  if (closed < parts.length) spans.push({ text: '`' + parts.slice(closed).join('`'), code: false });
  return spans.filter((s) => s.text !== '');
}

/** A place the versions panel reads and installs an agent's versions at: this machine (`id`
 * '', the installs local and container executors run: a task's container mounts them
 * read-only) or an SSH executor's build host (`id`, the `executor_id` of `agent.versions`,
 * `agent.install` and `agent.uninstall`). */
export interface InstallPlace {
  id: string;
  /** The select's option. */
  label: string;
  /** After "Installed by Kandev" and in the progress line. */
  where: string;
}

export const THIS_MACHINE: InstallPlace = { id: '', label: 'This machine (local and container executors)', where: 'on this machine' };

/** The `executor_id` part of a request about the installs at a place's `id` (none for this
 * machine). */
export function executorOf(id: string): { executor_id?: string } {
  return id ? { executor_id: id } : {};
}

/** This machine first, then each SSH executor by the server's order; other executors run this
 * machine's installs. `executors` is null while unread or when the list was refused. */
export function installPlaces(executors: readonly Pick<ExecutorDto, 'id' | 'name' | 'kind' | 'ssh'>[] | null): InstallPlace[] {
  const ssh = (executors ?? []).filter((x) => x.kind === 'ssh');
  return [
    THIS_MACHINE,
    ...ssh.map((x) => ({
      id: x.id,
      label: x.ssh ? `${x.name} (SSH, ${x.ssh.user}@${x.ssh.host})` : `${x.name} (SSH)`,
      where: `on ${x.name}'s build host`,
    })),
  ];
}
