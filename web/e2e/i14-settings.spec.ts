// Issue 14 defect 13: workflow settings say what they did: a saved step, an import (and the
// imported workflow is chosen), an export (a download), rename and delete.
import { readFileSync } from 'node:fs';
import { expect, test } from './kandev';

test('i14 d13 workflow settings confirm save, import, export, rename and delete', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/workflows`);
  const toasts = page.getByTestId('toast');
  // a step saved says so
  const step = page.locator('details', { hasText: 'Backlog' }).first();
  await step.locator('summary').click();
  await step.getByRole('button', { name: 'Save step' }).click();
  await expect(toasts.filter({ hasText: 'Saved “Backlog”' })).toBeVisible();

  // export downloads the YAML
  const downloading = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Export “Kanban”' }).click();
  const file = await downloading;
  expect(file.suggestedFilename()).toBe('kanban.yaml');
  const yaml = readFileSync((await file.path())!, 'utf8');
  expect(yaml).toContain('name: Kanban');
  await expect(toasts.filter({ hasText: 'Exported “Kanban”' })).toBeVisible();

  // import the same document under another name: confirmed, and chosen
  await page.getByLabel('YAML').fill(yaml.replace('name: Kanban', 'name: Second board'));
  await page.getByRole('button', { name: 'Import', exact: true }).click();
  await expect(toasts.filter({ hasText: 'Imported “Second board”' })).toBeVisible();
  const chosen = page.getByLabel('Workflow', { exact: true });
  await expect(chosen.locator('option:checked')).toHaveText('Second board');

  // rename, then delete it
  await page.getByLabel('Workflow name').fill('Renamed board');
  await page.getByRole('button', { name: 'Rename' }).click();
  await expect(toasts.filter({ hasText: 'Renamed to “Renamed board”' })).toBeVisible();
  await expect(chosen.locator('option:checked')).toHaveText('Renamed board');
  await page.getByRole('button', { name: 'Delete workflow' }).click();
  await page.getByRole('button', { name: 'Delete “Renamed board”' }).click();
  await expect(toasts.filter({ hasText: 'Deleted “Renamed board”' })).toBeVisible();
  await expect(chosen.locator('option')).toHaveText(['Kanban']);
});
