// An image reference as docker splits it: the repository, and the tag (`latest` when none is given).
export function splitImage(image: string): { repo: string; tag: string } {
  const colon = image.lastIndexOf(':');
  return colon > image.lastIndexOf('/') ? { repo: image.slice(0, colon), tag: image.slice(colon + 1) } : { repo: image, tag: 'latest' };
}
