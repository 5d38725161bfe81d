// Settings › Executors › Add a container executor (issue 42): each task's agent in a container of
// its own, made by Podman or Docker from an image already on this host (nothing is pulled). The
// network is `none` unless chosen otherwise (`host_ports` relays the listed ports of this host);
// mounts are read-only host paths. The container receives only the secrets it allows (issue 50).
import { useState } from 'react';
import { call } from '../../api/client';
import type { ContainerEngineDto, ContainerNetworkDto } from '../../api/generated/api';
import { namesFrom } from '../../lib/secrets';
import { AllowedSecretsField } from './AllowedSecrets';
import { useFormError } from './useFormError';

const EMPTY = {
  name: '',
  image: '',
  engine: '',
  network: 'none',
  host_ports: '',
  cpus: '',
  memory_mib: '',
  mounts: '',
  allowed_secrets: '',
};

/// A number field's value: `null` when empty; a value that is not a number is refused here
/// (JSON would carry it as `null`, which means "no limit").
function numberOrNull(label: string, text: string): number | null {
  if (text.trim() === '') return null;
  const value = Number(text);
  if (!Number.isFinite(value)) throw new Error(`${label} must be a number`);
  return value;
}

export function ContainerExecutorForm({ onAdded }: { onAdded: () => void }) {
  const [form, setForm] = useState(EMPTY);
  const { wrap, view } = useFormError();
  const set = (key: keyof typeof EMPTY) => (e: { target: { value: string } }) =>
    setForm((f) => ({ ...f, [key]: e.target.value }));
  return (
    <form
      className="form card-form"
      aria-label="Add container executor"
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          await call('executor.create', {
            name: form.name,
            kind: 'container',
            container: {
              image: form.image,
              engine: form.engine === '' ? null : (form.engine as ContainerEngineDto),
              network: form.network as ContainerNetworkDto,
              host_ports:
                form.network === 'host_ports'
                  ? form.host_ports
                      .split(/[\s,]+/)
                      .filter((port) => port !== '')
                      .map((port) => {
                        const value = Number(port);
                        if (!Number.isInteger(value)) throw new Error(`host port ${port} is not a number`);
                        return value;
                      })
                  : [],
              cpus: numberOrNull('CPUs', form.cpus),
              memory_mib: numberOrNull('Memory', form.memory_mib),
              mounts: form.mounts
                .split('\n')
                .map((line) => line.trim())
                .filter((line) => line !== ''),
            },
            allowed_secrets: namesFrom(form.allowed_secrets),
          });
          onAdded();
        });
        if (ok) setForm(EMPTY);
      }}
    >
      <h2>Add a container executor</h2>
      <label>
        Name <input value={form.name} onChange={set('name')} required placeholder="sandbox" />
      </label>
      <label>
        Image <span className="hint">already on this host; it needs a glibc (e.g. debian:12)</span>
        <input value={form.image} onChange={set('image')} required placeholder="localhost/agents:1" />
      </label>
      <label>
        Engine
        <select value={form.engine} onChange={set('engine')}>
          <option value="">Podman, else Docker</option>
          <option value="podman">Podman</option>
          <option value="docker">Docker</option>
        </select>
      </label>
      <label>
        Network
        <select value={form.network} onChange={set('network')}>
          <option value="none">None: the container reaches nothing</option>
          <option value="host_ports">Host ports: only the listed ports of this host's 127.0.0.1</option>
          <option value="full">Full: the engine's default network</option>
        </select>
      </label>
      {form.network === 'host_ports' && (
        <label>
          Host ports <span className="hint">reached at the same port of the container's 127.0.0.1</span>
          <input value={form.host_ports} onChange={set('host_ports')} required placeholder="5432, 6379" />
        </label>
      )}
      <label>
        CPUs <span className="hint">empty: no limit</span>
        <input value={form.cpus} onChange={set('cpus')} inputMode="decimal" placeholder="2" />
      </label>
      <label>
        Memory (MiB) <span className="hint">empty: no limit</span>
        <input value={form.memory_mib} onChange={set('memory_mib')} inputMode="numeric" placeholder="4096" />
      </label>
      <label>
        Read-only mounts <span className="hint">absolute host paths, one per line</span>
        <textarea value={form.mounts} onChange={set('mounts')} rows={2} placeholder="/home/me/.claude.json" />
      </label>
      <AllowedSecretsField value={form.allowed_secrets} onChange={(v) => setForm((f) => ({ ...f, allowed_secrets: v }))} />
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add container executor
        </button>
      </div>
    </form>
  );
}
