// Issue 18 scope 1 (part): a message queued while the agent is busy keeps its attachments,
// and the queue panel shows them (an image as a thumbnail).
import { expect, test, transcript } from './kandev';

// A 1×1 PNG.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

test('i18: a queued message shows its image attachment as a thumbnail in the queue panel', async ({ page, kandev }) => {
  const task = await kandev.createTask('Queue pictures', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Queue pictures');
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('#!mock\nhang');
  await box.press('Enter');
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  await box.evaluate((el, b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], 'later.png', { type: 'image/png' }));
    data.items.add(new File(['a note'], 'notes.txt', { type: 'text/plain' }));
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  }, PNG);
  await expect(page.getByRole('list', { name: 'Attached files' }).locator('.attachment-chip')).toHaveCount(2);
  await box.fill('when you are done');
  await box.press('Enter');
  const queued = page.getByRole('region', { name: 'Queued messages' }).locator('.queue-item');
  await expect(queued).toHaveCount(1);
  await expect(queued.locator('.queue-text')).toContainText('when you are done');
  const files = queued.getByRole('list', { name: 'Queued attachments' });
  const thumb = files.getByRole('img', { name: 'later.png' });
  await expect(thumb).toBeVisible();
  await expect.poll(() => thumb.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(1);
  await expect(files.locator('.file-chip')).toHaveText(['notes.txt']);
});
