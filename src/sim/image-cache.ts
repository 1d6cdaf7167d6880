// Which images each machine has pulled: a machine's first pull of an image is slow, later ones are
// fast (users: a first launch of a big image takes 10-15 min, 1-2 min on a host that has it;
// service-facts.md, "Startup time"). An image counts as pulled once an instance of it on that
// machine reached `running` (its pull completed); it stays pulled for the sim's life, whatever
// becomes of the instance. Names are compared as docker does: `repo` and `repo:latest` are one.
import { splitImage } from './image-name.js';

export class ImageCache {
  private readonly pulled = new Map<number, Set<string>>();

  add(machineId: number, image: string): void {
    let set = this.pulled.get(machineId);
    if (!set) this.pulled.set(machineId, (set = new Set()));
    set.add(canonical(image));
  }

  has(machineId: number, image: string): boolean {
    return this.pulled.get(machineId)?.has(canonical(image)) ?? false;
  }
}

function canonical(image: string): string {
  const { repo, tag } = splitImage(image.trim());
  return `${repo}:${tag}`;
}
