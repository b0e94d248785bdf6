// A script resource.
document.addEventListener('DOMContentLoaded', () => console.log('sample'));
