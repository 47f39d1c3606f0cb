# UTCP's code mode: a manual's tools called with keyword arguments, delivered as one object.
current = await weather_api.get_current(city="Lisbon", units="metric")
alerts = await weather_api.get_alerts(region="PT")
{"current": current, "alerts": len(alerts)}
