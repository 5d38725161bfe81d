// Issue 7 acceptance 4: a 2,000-task board and a 5,000-message transcript stay responsive.
// Measures time to first render and scrolling, writes the figures to
// test-artifacts/perf-ui.json (recorded in docs/performance-ui.md).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { artifacts, expect, test } from './kandev';

// One worker runs both so the figures land in one file.
test.describe.configure({ mode: 'serial' });

const figures: Record<string, unknown> = {};

test.afterAll(() => {
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(join(artifacts, 'perf-ui.json'), JSON.stringify(figures, null, 2));
  console.log('UI performance:', JSON.stringify(figures));
});

async function pool<T>(items: T[], width: number, f: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await f(items[next++]!);
    }),
  );
}

/** Scrolls `selector` from top to bottom (or bottom to top) one step per frame; frame times. */
async function scrollThrough(page: Page, selector: string, direction: 'down' | 'up', step: number) {
  return page.evaluate(
    async ({ selector, direction, step }) => {
      const el = document.querySelector<HTMLElement>(selector);
      if (!el) throw new Error(`no ${selector}`);
      const frame = () => new Promise<number>((r) => requestAnimationFrame(r));
      const frames: number[] = [];
      let last = await frame();
      const started = performance.now();
      for (let i = 0; i < 5000; i++) {
        const done =
          direction === 'down'
            ? el.scrollTop + el.clientHeight >= el.scrollHeight - 1
            : el.scrollTop <= 0 && !(window as any).__kandevPerf?.hasOlder;
        if (done) break;
        el.scrollTop += direction === 'down' ? step : -step;
        const now = await frame();
        frames.push(now - last);
        last = now;
      }
      frames.sort((a, b) => a - b);
      const q = (p: number) => Math.round((frames[Math.min(frames.length - 1, Math.floor(p * frames.length))] ?? 0) * 10) / 10;
      return {
        frames: frames.length,
        total_ms: Math.round(performance.now() - started),
        frame_p50_ms: q(0.5),
        frame_p95_ms: q(0.95),
        frame_max_ms: q(1),
      };
    },
    { selector, direction, step },
  );
}

test('a 2,000-task board renders fast and scrolls smoothly', async ({ page, kandev }) => {
  test.setTimeout(180_000);
  const { workflowId, steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  const review = steps.find((s) => s.name === 'Review')!;
  const started = Date.now();
  const titles = Array.from({ length: 2000 }, (_, i) => `Task ${String(i).padStart(4, '0')}`);
  await pool(titles, 8, (title) =>
    kandev.api('task.create', {
      workflow_id: workflowId,
      title,
      description: 'x'.repeat(Number(title.slice(5)) % 120),
      step_id: Number(title.slice(5)) % 4 === 0 ? review.id : backlog.id,
    }),
  );
  figures.board_tasks_created = 2000;
  figures.board_create_s = Math.round((Date.now() - started) / 100) / 10;

  await page.goto(`${kandev.url}/`);
  await expect(page.locator('.columns[data-loaded="true"]')).toBeVisible({ timeout: 30_000 });
  await expect(page.locator('section.column[data-step-name="Backlog"] .card').first()).toBeVisible();
  const render = await page.evaluate(() => Math.round(performance.now()));
  const backlogCount = page.locator('section.column[data-step-name="Backlog"]').getByTestId('column-count');
  await expect(backlogCount).toHaveText('1500');
  const inDom = await page.locator('.card').count();
  figures.board_first_render_ms = render; // navigation start → cards on screen
  figures.board_cards_in_dom = inDom;
  expect(inDom).toBeLessThan(200); // virtualized

  const scroll = await scrollThrough(page, 'section.column[data-step-name="Backlog"] .vscroll', 'down', 400);
  figures.board_scroll = scroll;
  await expect(page.locator('.card', { hasText: 'Task 1999' })).toBeVisible();
  expect(scroll.frame_p95_ms).toBeLessThan(250);

  // search over 2,000 cards
  const t0 = Date.now();
  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('Task 1234');
  await expect(page.locator('.card')).toHaveCount(1);
  figures.board_search_ms = Date.now() - t0;
});

test('a 5,000-message transcript renders fast and scrolls smoothly', async ({ page, kandev }) => {
  test.setTimeout(240_000);
  const lines = ['#!mock'];
  for (let i = 0; i < 2500; i++) {
    lines.push(`say Answer part ${i} with **markdown** and \`code\``);
    lines.push(`think thinking about step ${i}`);
  }
  // The script (~190 KB) is the session's first prompt (a message may be 1 MiB; a task's
  // description only 64 KiB); the line before `#!mock` is ignored by the mock agent. The task
  // waits in Backlog (no automation) so this session is its only one.
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  const task = await kandev.createTask('Long transcript', { step_id: backlog.id });
  const started = Date.now();
  const { session } = await kandev.api('session.launch', { task_id: task.id, prompt: ['Long transcript', ...lines].join('\n') });
  const sessionId = session.id;
  await expect
    .poll(async () => (await kandev.api('session.get', { id: sessionId })).session.state, { timeout: 180_000, intervals: [500] })
    .toBe('WAITING_FOR_INPUT');
  const { messages } = await kandev.api('message.list', { session_id: sessionId, before_seq: Number.MAX_SAFE_INTEGER, limit: 1 });
  const { messages: first } = await kandev.api('message.list', { session_id: sessionId, limit: 1000 });
  figures.transcript_generate_s = Math.round((Date.now() - started) / 100) / 10;
  expect(messages[0].content).toBe('thinking about step 2499');
  expect(first.length).toBe(1000);

  await page.goto(`${kandev.url}/tasks/${task.id}`);
  const log = page.getByRole('log', { name: 'Conversation' });
  await expect(log.locator('[data-kind="agent"]').last()).toContainText('Answer part 2499');
  figures.transcript_first_render_ms = await page.evaluate(() => Math.round(performance.now()));
  figures.transcript_first_page_ms = await page.evaluate(() => Math.round((window as any).__kandevPerf?.transcriptFirstPageMs ?? -1));
  figures.transcript_rows_in_dom = await log.locator('.vrow').count();
  expect(figures.transcript_rows_in_dom as number).toBeLessThan(150);

  // scroll to the very first message; older pages load on the way up
  const up = await scrollThrough(page, '.transcript', 'up', 1200);
  await expect(log.locator('[data-kind="user"]').first()).toContainText('Long transcript');
  const loaded = await page.evaluate(() => (window as any).__kandevPerf?.transcriptRows ?? 0);
  figures.transcript_messages_loaded = loaded;
  figures.transcript_scroll_to_top = up;
  expect(loaded).toBe(5001);
  const down = await scrollThrough(page, '.transcript', 'down', 1200);
  figures.transcript_scroll_to_bottom = down;
  expect(down.frame_p95_ms).toBeLessThan(250);
});
