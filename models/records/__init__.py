"""The record store: records as rows and as frozen blocks, the interned strings, names and their
registrable domains, filters, and the mark counting has read up to."""
