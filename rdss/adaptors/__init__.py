"""Channel Adaptors (spec: Message Gateway & Channel Adaptor): for repositories whose code cannot
change, a separate process polls what they already expose and publishes RDSS messages for them.

* :mod:`rdss.adaptors.oai_pmh` - any repository with an OAI-PMH endpoint (EPrints, DSpace,
  Figshare, Zenodo, Pure...): Dublin Core records become MetadataCreate, MetadataUpdate and
  MetadataDelete messages.
"""
