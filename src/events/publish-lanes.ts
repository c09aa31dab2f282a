/**
 * One API process publishes at most a few events of one project at once; the project's others
 * wait their turn, in order. A project's burst (as much as its quota allows at one instant) then
 * does not fill the process with its publishes, each interleaving with the others' on one event
 * loop, while another project's single publish waits behind all of them. Only accepted events
 * wait here: the quota refuses the rest first, so a project's line is at most its burst.
 */
export class PublishLanes {
  readonly #perProject: number;
  readonly #lanes = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(perProject: number) {
    this.#perProject = perProject;
  }

  /** Runs `publish` when the project has a free lane. */
  async run<T>(projectId: string, publish: () => Promise<T>): Promise<T> {
    let lane = this.#lanes.get(projectId);
    if (!lane) {
      lane = { running: 0, waiting: [] };
      this.#lanes.set(projectId, lane);
    }
    if (lane.running >= this.#perProject) await new Promise<void>((resolve) => lane.waiting.push(resolve));
    else lane.running += 1;
    try {
      return await publish();
    } finally {
      // The lane goes straight to the next in line; a project with none left is forgotten.
      const next = lane.waiting.shift();
      if (next) next();
      else if ((lane.running -= 1) === 0) this.#lanes.delete(projectId);
    }
  }
}
