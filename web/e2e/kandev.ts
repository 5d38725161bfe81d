// Test fixture: a real `kandev serve` process on 127.0.0.1 over a temp home, with helpers to
// call its API, and to kill and restart it on the same port and data.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test as base, expect, type Page } from '@playwright/test';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../..');
export const artifacts = join(repoRoot, 'test-artifacts');
export const binary = process.env.KANDEV_BIN ?? join(repoRoot, 'target/debug/kandev');

/** A free loopback port (bound, then released). */
export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => ok(port));
    });
  });
}

export class Kandev {
  url = '';
  private proc: ChildProcess | null = null;
  private log: string[] = [];
  constructor(
    readonly home: string,
    private addr: string,
    /** More `kandev serve` flags, e.g. a short event retention. */
    private flags: string[] = [],
    /** More environment variables for the server, e.g. a local npm registry. */
    private env: Record<string, string> = {},
  ) {}

  async start(): Promise<void> {
    const proc = spawn(binary, ['serve', '--addr', this.addr, '--home', this.home, ...this.flags], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // info: a failed test prints the log's tail, and a resync or a slow client shows there.
      env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', ...this.env },
    });
    this.proc = proc;
    proc.stderr?.on('data', (d: Buffer) => this.remember(d));
    this.url = await new Promise<string>((ok, fail) => {
      let out = '';
      const timer = setTimeout(() => fail(new Error(`kandev did not start:\n${this.log.join('')}`)), 30_000);
      proc.stdout?.on('data', (d: Buffer) => {
        this.remember(d);
        out += d.toString();
        const m = /Kandev is running at (http:\/\/\S+)/.exec(out);
        if (m?.[1]) {
          clearTimeout(timer);
          ok(m[1]);
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        fail(new Error(`kandev exited with ${code}:\n${this.log.join('')}`));
      });
    });
    // serve the same address on a restart
    this.addr = new URL(this.url).host;
  }

  private remember(d: Buffer) {
    this.log.push(d.toString());
    if (this.log.length > 400) this.log.splice(0, 200);
  }

  /** Ends the process (SIGKILL: a crash; SIGTERM: an orderly shutdown) and waits for it. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((ok) => proc.once('exit', () => ok()));
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    this.proc = null;
  }

  async restart(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.stop(signal);
    await this.start();
  }

  async api<T = any>(action: string, payload: object = {}): Promise<T> {
    const response = await fetch(`${this.url}/api/v1/${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(`${action}: ${response.status} ${JSON.stringify(body)}`);
    return body as T;
  }

  /** The default workspace and its Kanban board. */
  async board(): Promise<{ workspaceId: string; workflowId: string; steps: { id: string; name: string }[] }> {
    const { workspaces } = await this.api('workspace.list');
    const workspaceId = workspaces[0].id;
    const { workflows } = await this.api('workflow.list', { workspace_id: workspaceId });
    const wf = workflows[0];
    return { workspaceId, workflowId: wf.id, steps: wf.steps };
  }

  async createTask(title: string, extra: object = {}): Promise<any> {
    const { workflowId } = await this.board();
    return (await this.api('task.create', { workflow_id: workflowId, title, ...extra })).task;
  }

  logs(): string {
    return this.log.join('');
  }
}

export async function startKandev(addr = '127.0.0.1:0', flags: string[] = [], env: Record<string, string> = {}): Promise<Kandev> {
  const home = mkdtempSync(join(tmpdir(), 'kandev-e2e-'));
  const k = new Kandev(home, addr, flags, env);
  await k.start();
  return k;
}

export const test = base.extend<{ kandev: Kandev; kandevFlags: string[]; kandevEnv: Record<string, string> }>({
  /** More `kandev serve` flags for the fixture's server (`test.use({ kandevFlags: [...] })`). */
  kandevFlags: [[], { option: true }],
  /** More environment variables for the fixture's server: `test.use`, or a fixture of the
   * spec's own that depends on what it started (a local registry's address). */
  kandevEnv: [{}, { option: true }],
  kandev: async ({ kandevFlags, kandevEnv }, use, testInfo) => {
    const k = await startKandev('127.0.0.1:0', kandevFlags, kandevEnv);
    await use(k);
    if (testInfo.status !== testInfo.expectedStatus) {
      console.log(`--- kandev log for "${testInfo.title}" ---\n${k.logs().slice(-4000)}`);
    }
    await k.stop('SIGTERM');
    // The local runner outlives its server (for a restart) and may still run git or an agent
    // in the home: everything working there ends first, then the removal tries again while
    // files vanish.
    await removeHome(k.home);
    for (const repo of reposToRemove.splice(0)) rmSync(repo, { recursive: true, force: true });
  },
});

export { expect };

/** Processes whose command line names `dir` or whose working directory is inside it. */
function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // not ours to read
      }
      if (cmdline.includes(dir) || cwd === dir || cwd.startsWith(`${dir}/`)) found.push(pid);
    } catch {
      // gone already
    }
  }
  return found;
}

/** Ends what still works in a test's home, then removes it (retrying for up to 10 s). */
async function removeHome(home: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    for (const pid of processesIn(home)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    try {
      rmSync(home, { recursive: true, force: true });
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }
}

/** Repositories the running test made, removed once its server stopped. */
const reposToRemove: string[] = [];

/** Removes a repository a test made, once the test's server has stopped: until then the
 * server may still run git in it (a task's status refresh adds files while it is removed;
 * ENOTEMPTY was seen in CI even with retries). */
export function removeRepo(path: string): void {
  reposToRemove.push(path);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: false });
}

/** Opens the board and waits until it has loaded. */
export async function openBoard(page: Page, kandev: Kandev): Promise<void> {
  await page.goto(kandev.url + '/');
  await expect(page.locator('.columns[data-loaded="true"]')).toBeVisible();
  await expect(page.getByTestId('connection')).toHaveText('Live');
}

/** The transcript of the open session. */
export const transcript = (page: Page) => page.getByRole('log', { name: 'Conversation' });

/** Sends a message from the composer with Enter. */
export async function send(page: Page, text: string): Promise<void> {
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill(text);
  await box.press('Enter');
  await expect(box).toHaveValue('');
}

/** Runs git in `cwd` as a test author; answers its output, trimmed. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Kandev Test', '-c', 'user.email=test@kandev.invalid', ...args], { cwd })
    .toString()
    .trim();
}

/** A bare `origin` at `<tmp>/acme/widget.git` (a forge project `acme/widget`) whose `main`
 * has one commit of `files`, pushed from a clone `<tmp>/seed` (returned, to push more). */
export function forgeRemote(tmp: string, files: Record<string, string>): { origin: string; seed: string } {
  const origin = join(tmp, 'acme', 'widget.git');
  mkdirSync(origin, { recursive: true });
  git(origin, 'init', '-q', '--bare', '-b', 'main');
  git(tmp, 'clone', '-q', origin, 'seed');
  const seed = join(tmp, 'seed');
  git(seed, 'checkout', '-q', '-b', 'main');
  for (const [path, content] of Object.entries(files)) writeFileSync(join(seed, path), content);
  git(seed, 'add', '.');
  git(seed, 'commit', '-q', '-m', 'initial');
  git(seed, 'push', '-q', 'origin', 'main');
  return { origin, seed };
}

/** A fresh git repository in a temp folder (removed after the test, `removeRepo`): `main`
 * with one commit of `files` (path → content). */
export function gitRepo(files: Record<string, string>): string {
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-repo-'));
  git(repo, 'init', '-q', '-b', 'main');
  for (const [path, content] of Object.entries(files)) writeFileSync(join(repo, path), content);
  git(repo, 'add', '.');
  git(repo, 'commit', '-q', '-m', 'initial');
  return repo;
}
