"""The GIS side of the payload readers: GIS files through pyogrio (`gis`, `gis_zip`,
`geo_reader`, `geo_pages`), GeoParquet through pyarrow (`geoparquet`), the canonical
geometry a change is judged on (`geometry`, `grid`) and coordinate systems
(`geographic`). Nothing is imported here: a module that needs only the canonical
geometry does not load the readers and their libraries."""
