"""feedledger in Dagster (`pip install 'feedledger[dagster]'`): a face over the public
API, like the CLI and the HTTP server, that the core never imports.

* `FeedledgerResource` (`resource`): opens a workspace, or a store URL and an archive.
* `feedledger_assets(resource, sources=[...])` (`assets`): per source an observable
  source asset (the publisher's date, ETag or edit date as its `DataVersion`), an asset
  that runs the source (a live run or the scheduler's catch-up), an asset partitioned by
  publication date whose range backfills are ONE feedledger backfill, the asset checks
  (`checks`: fresh, no_unrecorded_gaps, no_held_burst blocking, reconciled per
  destination) and a sensor adding a partition per archived publication (`sensors`);
  names, groups and metadata from a `FeedledgerTranslator` (`translator`).
* `metadata`: feedledger's results as Dagster metadata.
"""

from feedledger.dagster.assets import FeedledgerDestination, feedledger_assets
from feedledger.dagster.resource import FeedledgerResource
from feedledger.dagster.translator import FeedledgerTranslator

__all__ = [
    "FeedledgerDestination",
    "FeedledgerResource",
    "FeedledgerTranslator",
    "feedledger_assets",
]
