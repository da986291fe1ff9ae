import { useEffect, useState } from 'react';
import {
  Masthead, MastheadBrand, MastheadContent, MastheadLogo, MastheadMain, Nav, NavItem, NavList, Page, PageSection,
  SkipToContent,
} from '@patternfly/react-core';
import { JobsPage } from './JobsPage';
import { JobPage } from './JobPage';
import { CreatePage } from './CreatePage';
import { GuidePage } from './GuidePage';

// The route is the address's hash: #/jobs, #/jobs/<ns>/<name>,
// #/create[?from=<ns>/<name>], #/guide.
function useRoute(): string[] {
  const read = () => (window.location.hash.replace(/^#\/?/, '') || 'jobs').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function App() {
  const route = useRoute();
  const [top, ...rest] = route;
  const page = top.split('?')[0];
  const from = new URLSearchParams(window.location.hash.split('?')[1] ?? '').get('from') ?? undefined;
  let content;
  switch (page) {
    case 'jobs':
      content = rest.length >= 2 ? <JobPage key={`${rest[0]}/${rest[1]}`} namespace={rest[0]} name={rest[1]} /> : <JobsPage />;
      break;
    case 'create':
      content = <CreatePage key={from ?? ''} from={from} />;
      break;
    case 'guide':
      content = <GuidePage />;
      break;
    default:
      content = <PageSection><p>No such page. <a href="#/jobs">See your jobs</a>.</p></PageSection>;
  }
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>
          <MastheadLogo component="a" href="#/jobs">Torus</MastheadLogo>
        </MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <Nav variant="horizontal" aria-label="Dashboard">
          <NavList>
            <NavItem isActive={page === 'jobs'} to="#/jobs">Jobs</NavItem>
            <NavItem isActive={page === 'create'} to="#/create">Create a job</NavItem>
            <NavItem isActive={page === 'guide'} to="#/guide">Which job type?</NavItem>
          </NavList>
        </Nav>
      </MastheadContent>
    </Masthead>
  );
  return (
    <Page masthead={masthead} skipToContent={<SkipToContent href="#main">Skip to content</SkipToContent>} mainContainerId="main">
      {content}
    </Page>
  );
}
