// Settings › Health (issue 43): what `kandev doctor` checks that the running server can check
// on itself (system.doctor): git, its home and free space, the database's integrity, the agents
// the profiles use, the executors' tools, the runner. Each problem says what fixes it.
import { useCallback } from 'react';
import { call } from '../../api/client';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';

export function Health() {
  const read = useCallback(() => call('system.doctor', {}), []);
  const health = useRead(read);
  const report = health.data;
  const problems = report ? report.findings.filter((f) => !f.ok).length : 0;
  return (
    <section>
      <h1>Health</h1>
      <p className="hint">
        What this server needs on its machine, checked now. <code>kandev doctor</code> on the command line checks the
        same and more (the database's schema before an upgrade, the port) and works while the server is stopped.
      </p>
      <InlineError error={health.error} onRetry={health.retry} testId="health-error" />
      {report === null ? (
        !health.error && <p className="hint">Checking…</p>
      ) : (
        <>
          <p role="status" data-testid="health-summary">
            {problems === 0 ? 'No problem found.' : `${problems} problem${problems === 1 ? '' : 's'}: each says what fixes it.`}
          </p>
          <table className="table" aria-label="Health checks">
            <thead>
              <tr>
                <th>Check</th>
                <th>State</th>
                <th>Found</th>
              </tr>
            </thead>
            <tbody>
              {report.findings.map((f, i) => (
                <tr key={`${f.what}-${i}`} data-testid="health-finding" data-ok={f.ok}>
                  <td>{f.what}</td>
                  <td className={f.ok ? '' : 'health-problem'}>{f.ok ? 'ok' : 'problem'}</td>
                  <td>{f.detail}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <button onClick={health.retry}>Check again</button>
        </>
      )}
    </section>
  );
}
