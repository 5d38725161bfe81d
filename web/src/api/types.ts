// The API's types: everything is generated from the Rust types of crates/kandev-api-types
// (./generated/api.ts, checked by its `ts_bindings` test): objects, requests and responses, the
// `Actions` map the client's `call` is typed by, and the `Notification` frames of `/ws`.
// Only what the server does not send is written here.
export type * from './generated/api';
import type { Actions, AgentKindInfo, ErrorBody, ErrorCode, WorkflowTemplateDto } from './generated/api';

/** An action both transports serve (`POST /api/v1/<action>`). */
export type ActionName = keyof Actions;

/** One entry of `agent.kinds`. */
export type AgentKind = AgentKindInfo;

/** One entry of `workflow.template.list`. */
export type WorkflowTemplate = WorkflowTemplateDto;

/** An error as the client reports it: the server's body, or `NETWORK` when it cannot be reached. */
export type ErrorPayload = Omit<ErrorBody, 'code'> & { code: ErrorCode | 'NETWORK' };
