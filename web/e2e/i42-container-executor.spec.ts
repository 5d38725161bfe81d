// Issue 42 (scope 1): Settings › Executors adds a container executor (a bad mount is refused with
// the field named), shows its image, network and allowed host ports, and checks it: each step's finding or the line
// that fixes it. Docker is chosen and no Docker daemon runs here, so the check stops at the engine.
import { expect, test } from './kandev';

test('i42: a container executor is added, checked and deleted in settings', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/executors`);
  const form = page.getByRole('form', { name: 'Add container executor' });
  await form.getByLabel(/^Name/).fill('sandbox');
  await form.getByLabel(/^Image/).fill('localhost/agents:1');
  await form.getByLabel(/^Engine/).selectOption('docker');
  await form.getByLabel(/^Read-only mounts/).fill('relative/path');
  await form.getByRole('button', { name: 'Add container executor' }).click();
  await expect(form.getByRole('alert')).toContainText('container mounts');
  await expect(form.getByRole('alert')).toContainText('must be an absolute path');

  await form.getByLabel(/^Read-only mounts/).fill('/etc/hostname');
  await form.getByLabel(/^Network/).selectOption('host_ports');
  await form.getByLabel(/^Host ports/).fill('8080, 5432 8080');
  await form.getByRole('button', { name: 'Add container executor' }).click();
  const row = page.getByRole('table', { name: 'Executors' }).locator('tbody tr');
  await expect(row).toHaveCount(1);
  await expect(row).toContainText('container localhost/agents:1 (network host_ports 5432, 8080)');
  const [stored] = (await kandev.api('executor.list', {})).executors;
  expect(stored.container).toMatchObject({
    engine: 'docker',
    network: 'host_ports',
    host_ports: [5432, 8080],
    mounts: ['/etc/hostname'],
  });

  await row.getByRole('button', { name: 'Check' }).click();
  await expect(row.getByTestId('executor-check-result')).toContainText('Check failed: engine: no container engine runs here');

  await row.getByRole('button', { name: 'Delete sandbox' }).click();
  await expect(page.getByText('No executors yet.')).toBeVisible();
});
