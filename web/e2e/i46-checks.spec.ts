// Issue 46 scope 4: the Changes tab shows a pull request's checks per job with their links
// and log tails, the feedback rounds sent to the agent, and why auto-fix stopped. A fake
// GitHub on loopback decides each check from `ci-result` in the commit it runs on; the
// server polls it every 200 ms.
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, forgeRemote, git, removeRepo, screenshot, test } from './kandev';

const TOKEN_ENV = 'KANDEV_E2E_FORGE_TOKEN';
process.env[TOKEN_ENV] = 'e2e-forge-secret';

test.use({ kandevFlags: ['--pr-poll-interval', '200ms'] });

/** A fake GitHub whose check `test` of a commit fails when its `ci-result` says `fail`. */
async function fakeForge(origin: string) {
  let branch = '';
  const commit = (rev: string) => git(origin, 'rev-parse', rev);
  const fails = (sha: string) => {
    try {
      return execFileSync('git', ['show', `${sha}:ci-result`], { cwd: origin }).toString().startsWith('fail');
    } catch {
      return false;
    }
  };
  const shas: string[] = [];
  const job = (sha: string) => (shas.includes(sha) ? shas.indexOf(sha) : shas.push(sha) - 1) + 1;
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      const json = (value: unknown) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(value));
      };
      const pr = () => ({
        number: 12, html_url: 'http://forge.test/acme/widget/pull/12', state: 'open', merged: false,
        head: { ref: branch, sha: commit(`refs/heads/${branch}`) }, base: { ref: 'main' }, mergeable_state: 'clean',
      });
      if (req.method === 'POST' && path === '/repos/acme/widget/pulls') {
        branch = String((JSON.parse(text) as { head: string }).head);
        return json(pr());
      }
      if (path === '/repos/acme/widget/pulls/12') return json(pr());
      if (path.endsWith('/check-runs')) {
        const sha = commit(decodeURIComponent(path.split('/')[5] ?? 'main'));
        const id = job(sha);
        return json({ total_count: 1, check_runs: [{ id, name: 'test', status: 'completed',
          conclusion: fails(sha) ? 'failure' : 'success', html_url: `http://ci.test/runs/${id}` }] });
      }
      if (path.startsWith('/repos/acme/widget/actions/jobs/')) {
        const sha = shas[Number(path.split('/')[6]) - 1] ?? '';
        return res.end(`running the tests of ${sha}\nerror: ci-result says ${fails(sha) ? 'fail' : 'pass'}\n`);
      }
      if (path.endsWith('/status')) return json({ state: 'pending', total_count: 0 });
      if (path.endsWith('/reviews') || path.endsWith('/comments')) return json([]);
      res.statusCode = 404;
      json({ message: 'Not Found' });
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/** The PR step: the agent's "fix" still fails; one round of feedback, then it stops. */
const FLOW = `version: 1
kind: kandev-workflow
workflows:
  - name: CI flow
    steps:
      - name: Backlog
      - name: PR
        prompt: "#!mock\\nwrite ci-result fail again\\\\n\\nterminal git commit -qam try-again\\nsay tried"
        events:
          on_enter: [{type: create_pull_request}]
          on_turn_complete: [{type: push}]
          on_pr_checks_failed: [{type: send_feedback, max_rounds: 1}]
      - name: Done
`;

test('i46 4: the Changes tab shows the checks per job, the rounds used and why auto-fix stopped', async ({
  page,
  kandev,
}) => {
  const tmp = mkdtempSync(join(tmpdir(), 'kandev-e2e-ci-'));
  const { origin } = forgeRemote(tmp, { 'ci-result': 'pass\n' });
  git(tmp, 'clone', '-q', origin, 'clone');
  const forge = await fakeForge(origin);
  try {
    const { workspaceId } = await kandev.board();
    const { workflows } = await kandev.api('workflow.import', { workspace_id: workspaceId, yaml: FLOW });
    const steps = workflows[0].steps as { id: string; name: string }[];
    const step = (name: string) => steps.find((s) => s.name === name)!.id;
    const { repository } = await kandev.api('repository.create', {
      workspace_id: workspaceId,
      local_path: join(tmp, 'clone'),
      forge_api_base_url: forge.url,
      forge_token_env: TOKEN_ENV,
    });
    const { task } = await kandev.api('task.create', {
      workflow_id: workflows[0].id,
      title: 'Green it',
      step_id: step('Backlog'),
      repositories: [{ id: repository.id }],
    });
    const { session } = await kandev.api('session.launch', { task_id: task.id });
    await expect.poll(async () => (await kandev.api('session.get', { id: session.id })).session.state).toBe('WAITING_FOR_INPUT');
    writeFileSync(join(session.cwd, 'ci-result'), 'fail\n');
    git(session.cwd, 'commit', '-qam', 'the work');

    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await page.getByRole('tab', { name: 'Changes' }).click();
    await kandev.api('task.move', { id: task.id, step_id: step('PR') });

    // The first failure goes to the agent; its "fix" fails again and auto-fix stops, live.
    const checks = page.getByRole('region', { name: 'Checks' });
    await expect(checks.getByTestId('autofix-stopped')).toContainText('auto-fix stopped', { timeout: 20_000 });
    await expect(checks.getByTestId('feedback-rounds')).toHaveText('Feedback sent to the agent: 1 round');
    const job = checks.getByTestId('check');
    await expect(job).toHaveAttribute('data-state', 'failure');
    await expect(job.getByRole('link', { name: 'test' })).toHaveAttribute('href', /^http:\/\/ci\.test\/runs\/\d+$/);
    await job.getByText('End of its log').click();
    await expect(job.locator('pre')).toContainText('error: ci-result says fail');
    await expect(page.getByText('needs you: the pull request’s auto-fix stopped')).toBeVisible();
    await screenshot(page, 'i46-checks');
  } finally {
    forge.close();
    removeRepo(tmp);
  }
});
