import { readFileSync } from "node:fs";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";
const [dir, userConfigJson] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, "utf-8"));
const config = await getMcpConfigForManifest({
  manifest, extensionPath: dir, systemDirs: { HOME: process.env.HOME, DESKTOP: `${process.env.HOME}/Desktop`, DOCUMENTS: `${process.env.HOME}/Documents`, DOWNLOADS: `${process.env.HOME}/Downloads` },
  userConfig: JSON.parse(userConfigJson), pathSeparator: "/",
});
console.log(JSON.stringify(config));
