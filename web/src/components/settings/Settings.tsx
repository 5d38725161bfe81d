// Settings: one section per file in this folder (agent profiles, repositories, workflows,
// intake, saved prompts, executors, health),
// chosen by the route (`/settings/<section>`).
import { navigate } from '../../lib/router';
import { Executors } from './Executors';
import { Health } from './Health';
import { Intake } from './Intake';
import { Notifications } from './Notifications';
import { Profiles } from './Profiles';
import { Prompts } from './Prompts';
import { Repositories } from './Repositories';
import { Workflows } from './Workflows';

const SECTIONS = [
  ['profiles', 'Agent profiles'],
  ['repositories', 'Repositories'],
  ['workflows', 'Workflows'],
  ['intake', 'Intake'],
  ['notifications', 'Notifications'],
  ['prompts', 'Prompts'],
  ['executors', 'Executors'],
  ['health', 'Health'],
] as const;

export function Settings({ section }: { section: string }) {
  return (
    <div className="settings">
      <nav className="settings-nav" aria-label="Settings">
        {SECTIONS.map(([id, label]) => (
          <a
            key={id}
            href={`/settings/${id}`}
            aria-current={section === id ? 'page' : undefined}
            className={section === id ? 'active' : ''}
            onClick={(e) => {
              e.preventDefault();
              navigate(`/settings/${id}`);
            }}
          >
            {label}
          </a>
        ))}
      </nav>
      <div className="settings-body">
        {section === 'repositories' ? (
          <Repositories />
        ) : section === 'workflows' ? (
          <Workflows />
        ) : section === 'intake' ? (
          <Intake />
        ) : section === 'notifications' ? (
          <Notifications />
        ) : section === 'prompts' ? (
          <Prompts />
        ) : section === 'executors' ? (
          <Executors />
        ) : section === 'health' ? (
          <Health />
        ) : (
          <Profiles />
        )}
      </div>
    </div>
  );
}
