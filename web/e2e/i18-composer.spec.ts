// Issue 18 acceptance 5 (part): the composer offers the agent's slash commands on `/`, and
// the session bar shows the context window use the agent reported, also after a reload.
import { expect, send, test, transcript } from './kandev';

test('i18 a5: `/` shows the mock agent’s commands and choosing one sends /name args', async ({ page, kandev }) => {
  const task = await kandev.createTask('Commands', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Commands');
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('/');
  const menu = page.getByRole('listbox', { name: 'Agent commands' });
  await expect(menu.getByRole('option')).toHaveText([
    '/echo text — Echo the first line back',
    '/script directives — Run a #!mock script',
  ]);
  await box.pressSequentially('s');
  await expect(menu.getByRole('option')).toHaveText(['/script directives — Run a #!mock script']);
  await box.fill('/');
  await box.press('Enter'); // the highlighted (first) one
  await expect(box).toHaveValue('/echo ');
  await expect(menu).toHaveCount(0);
  await box.pressSequentially('hello there');
  await box.press('Enter');
  await expect(box).toHaveValue('');
  await expect(transcript(page).locator('[data-kind="user"]').nth(1)).toHaveText('/echo hello there');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('echo: /echo hello there');
});

test('i18 a5: the context window use the agent reports is shown, and still after a reload', async ({ page, kandev }) => {
  const task = await kandev.createTask('Usage', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Usage');
  await expect(page.getByTestId('session-usage')).toHaveCount(0);
  await send(page, '#!mock\nusage 1200 200000 900 300\nsay counted');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('counted');
  await expect(page.getByTestId('session-usage')).toHaveText('context 1,200 / 200,000');
  await page.reload();
  await expect(page.getByTestId('session-usage')).toHaveText('context 1,200 / 200,000');
});

// A 1×1 PNG.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

test('i18 a5: a pasted image is uploaded, sent with the message and shown in the transcript', async ({ page, kandev }) => {
  const task = await kandev.createTask('Paste', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Paste');
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.evaluate((el, b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], 'shot.png', { type: 'image/png' }));
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  }, PNG);
  const chips = page.getByRole('list', { name: 'Attached files' }).locator('.attachment-chip');
  await expect(chips).toHaveText(['shot.png✕']);
  await box.fill('look at this');
  await box.press('Enter');
  await expect(chips).toHaveCount(0);
  const user = transcript(page).locator('[data-kind="user"]').nth(1);
  await expect(user.locator('.bubble')).toHaveText('look at this');
  const thumb = user.getByRole('img', { name: 'shot.png' });
  await expect(thumb).toBeVisible();
  await expect.poll(() => thumb.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(1);
  // The mock takes images: it got an ACP image block.
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toContainText(/received image image\/png \d+ bytes/);
  await page.reload();
  await expect(transcript(page).locator('[data-kind="user"]').nth(1).getByRole('img', { name: 'shot.png' })).toBeVisible();
});
