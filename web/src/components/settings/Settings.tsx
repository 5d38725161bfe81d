// Settings: one section per file in this folder (agent profiles, repositories, workflows,
// intake, saved prompts, executors, issue 50's secrets, health, and issue 49's members, users
// and activity), chosen by the route (`/settings/<section>`). A section the person's role
// cannot use at all is not offered (Health and Activity are for admins, Users for the
// server's owner).
import type { ComponentType } from 'react';
import { useRole } from '../../lib/me';
import { navigate } from '../../lib/router';
import { Activity } from './Activity';
import { Executors } from './Executors';
import { Health } from './Health';
import { Intake } from './Intake';
import { Members } from './Members';
import { Notifications } from './Notifications';
import { Profiles } from './Profiles';
import { Prompts } from './Prompts';
import { Repositories } from './Repositories';
import { Secrets } from './Secrets';
import { Users } from './Users';
import { Workflows } from './Workflows';

/** Who a section is offered to: anyone, an admin of some workspace, or the owner of a server
 * with accounts. */
type Audience = 'anyone' | 'admin' | 'owner';

/** Each section: its route id, its label, who it is offered to, and what it shows. */
type Section = [string, string, Audience, ComponentType];

/** Shown first, and for a section that is not offered. */
const PROFILES: Section = ['profiles', 'Agent profiles', 'anyone', Profiles];

const SECTIONS: Section[] = [
  PROFILES,
  ['repositories', 'Repositories', 'anyone', Repositories],
  ['workflows', 'Workflows', 'anyone', Workflows],
  ['intake', 'Intake', 'anyone', Intake],
  ['notifications', 'Notifications', 'anyone', Notifications],
  ['prompts', 'Prompts', 'anyone', Prompts],
  ['executors', 'Executors', 'anyone', Executors],
  // Offered to all: someone who may not set secrets reads who can (a workspace's admins).
  ['secrets', 'Secrets', 'anyone', Secrets],
  ['members', 'Members', 'anyone', Members],
  ['users', 'Users', 'owner', Users],
  ['activity', 'Activity', 'admin', Activity],
  ['health', 'Health', 'admin', Health],
];

export function Settings({ section }: { section: string }) {
  const role = useRole();
  const offered = (audience: Audience) =>
    audience === 'anyone' ||
    (audience === 'admin' && role.canSomewhere('admin')) ||
    (audience === 'owner' && role.canSomewhere('owner') && (role.me?.accounts ?? false));
  const sections = SECTIONS.filter(([, , audience]) => offered(audience));
  // A section not offered shows the first one; until `user.me` answers, nothing is known.
  const known = role.me !== null || role.canSomewhere('owner');
  const asked = SECTIONS.find(([id]) => id === section);
  const current: Section = sections.find(([id]) => id === section) ?? PROFILES;
  const shown = current[0];
  const Body = current[3];
  return (
    <div className="settings">
      <nav className="settings-nav" aria-label="Settings">
        {sections.map(([id, label]) => (
          <a
            key={id}
            href={`/settings/${id}`}
            aria-current={shown === id ? 'page' : undefined}
            className={shown === id ? 'active' : ''}
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
        {!known && asked && asked[2] !== 'anyone' ? <p className="hint">Reading…</p> : <Body />}
      </div>
    </div>
  );
}
