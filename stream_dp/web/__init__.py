"""The live map's page: its static assets, and the basemap they draw under the hexagons."""
