# syntax=docker/dockerfile:1
#
# One image for every role of the service: `api` (default), `worker` and `migrate`
# (see docker-compose.yml). Node 26, the Active LTS line (support until April 2029), runs the
# TypeScript sources itself: it strips the types (every file uses erasable syntax only), so
# production has no compile step and no run-time transpiler (tsx is a dev dependency, for
# Node 20 machines). Only the Temporal workflow bundle is built ahead of time, so that
# workers start without running webpack.
FROM node:26-bookworm-slim

ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false

WORKDIR /app

# Dependencies first, so that this layer is cached until the lockfile changes.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

COPY tsconfig.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
COPY drizzle ./drizzle
COPY scripts ./scripts

# Writes dist/workflow-bundle.js (WORKFLOW_BUNDLE_PATH defaults to it).
RUN npm run build:workflows

# Sources stay root-owned and read-only for the runtime user; only the data
# directory (DATA_DIR, unused when DATABASE_URL is set) is writable.
RUN mkdir -p .data && chown node:node .data
USER node

EXPOSE 8080
CMD ["npm", "run", "api"]
