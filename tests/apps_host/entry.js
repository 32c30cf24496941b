// What the test host page needs from the official MCP Apps SDK: the host-side bridge and its transport.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.AppBridge = AppBridge;
window.PostMessageTransport = PostMessageTransport;
